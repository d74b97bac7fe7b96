// What an actor is doing, in one word of shared memory (a small file in /dev/shm per actor): the
// actor sets it, the launcher reads it to SIGKILL an actor in the middle of an extend.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

namespace shared_job {

enum class Phase : std::uint32_t { Starting, Acting, Extending, Done };

class ActorPhase {
 public:
  // The actor's side: creates the file (the launcher removes it).
  static ActorPhase create(const std::filesystem::path& path);
  // The launcher's side: maps the file once the actor made it; false while it is not there yet.
  static bool try_open(const std::filesystem::path& path, ActorPhase& out);

  ActorPhase() = default;
  ActorPhase(ActorPhase&& other) noexcept;
  ActorPhase& operator=(ActorPhase&& other) noexcept;
  ActorPhase(const ActorPhase&) = delete;
  ActorPhase& operator=(const ActorPhase&) = delete;
  ~ActorPhase();

  void set(Phase phase) { word()->store(static_cast<std::uint32_t>(phase), std::memory_order_release); }
  Phase get() const { return static_cast<Phase>(word()->load(std::memory_order_acquire)); }

 private:
  explicit ActorPhase(void* mapping) : mapping_(mapping) {}
  std::atomic<std::uint32_t>* word() const { return static_cast<std::atomic<std::uint32_t>*>(mapping_); }
  void* mapping_ = nullptr;
};

// Where actor `id` of run `name` keeps its phase.
std::filesystem::path phase_path(const std::string& name, int id);

}  // namespace shared_job
