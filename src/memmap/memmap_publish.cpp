// The target directory, temporary siblings and publishing of memmap saves (memmap_publish.hpp).
#include "memmap/memmap_publish.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "core/text_format.hpp"
#include "memmap/memmap_fs.hpp"
#include "memmap/memmap_meta.hpp"
#include "tensortree/error.hpp"

namespace tensortree::detail {

namespace fs = std::filesystem;

namespace {

// ---- the target directory -----------------------------------------------------------------------

enum class TargetState { Absent, Empty, MemmapTree, Other };

TargetState target_state(const fs::path& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return TargetState::Absent;
    TT_OS_ERROR("lstat", target);
  }
  if (!S_ISDIR(st.st_mode)) return TargetState::Other;
  if (fs::is_empty(target)) return TargetState::Empty;
  struct stat meta {};
  const fs::path meta_file = target / detail::kMetaFileName;
  if (::lstat(meta_file.c_str(), &meta) == 0 && S_ISREG(meta.st_mode)) return TargetState::MemmapTree;
  return TargetState::Other;
}

}  // namespace

void check_target(const fs::path& target, MemmapOverwrite policy) {
  const TargetState state = target_state(target);
  if (state == TargetState::Absent || state == TargetState::Empty) return;
  if (state == TargetState::Other) {
    throw InvalidArgument(fmt::format("memmap_: '{}' exists and is not a memmap tree (a directory with a meta.json); "
                                      "it is left alone", target.string()));
  }
  if (policy == MemmapOverwrite::Error) {
    throw InvalidArgument(fmt::format("memmap_: '{}' already holds a memmap tree; pass MemmapOverwrite::Replace to "
                                      "replace it", target.string()));
  }
}

// A save's target without a trailing separator: "dir/" names "dir".
fs::path normalized_target(const fs::path& dir) {
  fs::path target = fs::absolute(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  if (target == target.root_path()) throw InvalidArgument("memmap_: the root directory cannot be a memmap target");
  return target;
}

namespace {

// ---- temporary directories ----------------------------------------------------------------------

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "host";
  std::string out(name);
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

std::string temp_prefix(const fs::path& target) {
  std::string prefix = ".";
  prefix += target.filename().string();
  prefix += ".tmp-";
  return prefix;
}

}  // namespace

// ".<name>.tmp-<host>-<pid>-<random>": unique per save, and it says which process owns it.
fs::path temp_sibling(const fs::path& target) {
  std::random_device random;
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "-%ld-%08x%08x", static_cast<long>(::getpid()), random(), random());
  std::string name = temp_prefix(target);
  name += host_name();
  name += suffix;
  return target.parent_path() / name;
}

// Temporary trees left by saves that were killed: only those of dead processes on this host, so a
// save in progress elsewhere (another process, another host on a shared filesystem) is never touched.
void remove_stale_temps(const fs::path& target) {
  std::string prefix = temp_prefix(target);
  prefix += host_name();
  prefix += '-';
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const auto dash = rest.find('-');
    if (dash == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dash || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

namespace {

// ---- publishing -----------------------------------------------------------------------------

bool rename_noreplace(const fs::path& from, const fs::path& to, int& err) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  err = errno;
  return false;
}

// Filesystems without renameat2 flags (some network filesystems): the old tree steps aside under
// the temporary name, then the new one moves in. Not atomic: a crash between the two renames leaves
// the target absent and the previous tree at the temporary name.
void publish_without_exchange(const fs::path& temp, const fs::path& target, const fs::path& aside) {
  if (::rename(target.c_str(), aside.c_str()) != 0 && errno != ENOENT) TT_OS_ERROR("rename", target);
  if (::rename(temp.c_str(), target.c_str()) != 0) TT_OS_ERROR("rename", temp);
}

}  // namespace

// Moves the finished tree at `temp` to `target`. Afterwards `temp` holds the previous tree, if any.
void publish(const fs::path& temp, const fs::path& target, MemmapOverwrite policy) {
  // Another save may publish between our attempts; each round re-checks what is there now.
  for (int attempt = 0; attempt < 64; ++attempt) {
    int err = 0;
    if (rename_noreplace(temp, target, err)) return;
    if (err == EINVAL || err == ENOSYS) {
      check_target(target, policy);
      fs::path aside = temp;
      aside += ".old";
      publish_without_exchange(temp, target, aside);
      std::error_code absent;  // no previous tree: nothing stepped aside
      fs::rename(aside, temp, absent);
      return;
    }
    if (err != EEXIST && err != ENOTEMPTY) detail::throw_os_error("renameat2", target, err, __FILE__, __LINE__);
    check_target(target, policy);
    if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) return;
    if (errno != ENOENT) TT_OS_ERROR("renameat2(RENAME_EXCHANGE)", target);
  }
  throw BackendError(fmt::format("memmap_: '{}' kept changing under concurrent saves", target.string()));
}

}  // namespace tensortree::detail
