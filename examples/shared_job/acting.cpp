#include "acting.hpp"

#include <string>

#include "tensortree/error.hpp"
#include "values.hpp"

using namespace tensortree;

namespace shared_job {

void check_weights(const Options& o, const TensorTree& params, std::int64_t version) {
  if (const std::int64_t wrong = wrong_param_elements(params, version); wrong != 0) {
    throw CorruptData("actor " + std::to_string(o.actor_id) + ": " + std::to_string(wrong) +
                      " wrong elements in the weights of version " + std::to_string(version));
  }
}

void act(const Options& o, TensorTree& trajectory, std::int64_t trajectory_id, const TensorTree& params,
         std::int64_t version) {
  fill_trajectory(trajectory, o.actor_id, trajectory_id, params, version);
  if (o.corrupt && o.actor_id == corrupting_actor(o)) trajectory.get("observation").data<float>()[0] += 1;
}

}  // namespace shared_job
