// Umbrella header: everything a user of the library needs.
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
