// One naming rule for what rl keeps in shared memory: a plain name of kind k (replay, weights)
// lives at /dev/shm/tensortree-<k>-<name>, so a buffer and a publication may share a name, and
// the library's files in /dev/shm are told apart from everyone else's.
#pragma once

#include <filesystem>
#include <string_view>

namespace tensortree::rl {

inline constexpr std::string_view kReplayKind = "replay";
inline constexpr std::string_view kWeightsKind = "weights";

// /dev/shm/tensortree-<kind>-<name>. InvalidArgument naming `who` for a name that is not one plain
// file name (empty, ".", "..", or holding '/' or NUL).
std::filesystem::path shared_memory_path(std::string_view kind, std::string_view name, std::string_view who);

}  // namespace tensortree::rl
