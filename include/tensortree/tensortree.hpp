// Umbrella header: everything a user of the library needs, but for dist_objects.hpp (object
// collectives, whose templates need Boost.Serialization's headers and library: include it where
// you use them) and torch.hpp (the libtorch bridge).
#pragma once

#include "tensortree/config.hpp"
#include "tensortree/device.hpp"
#include "tensortree/dtype.hpp"
#include "tensortree/error.hpp"
#include "tensortree/path.hpp"
#include "tensortree/shape.hpp"
#include "tensortree/storage.hpp"
#include "tensortree/tensor.hpp"
#include "tensortree/slice.hpp"
#include "tensortree/work.hpp"
#include "tensortree/comm_options.hpp"
#include "tensortree/transfer.hpp"
#include "tensortree/dlpack.hpp"
#include "tensortree/schema.hpp"
#include "tensortree/tree.hpp"
#include "tensortree/memmap.hpp"
#include "tensortree/cuda_stream.hpp"
#include "tensortree/group.hpp"
#include "tensortree/device_mesh.hpp"
#include "tensortree/dist_context.hpp"
#include "tensortree/dist_ops.hpp"
#include "tensortree/replay_buffer.hpp"
#include "tensortree/weights.hpp"
#include "tensortree/policy_version.hpp"
