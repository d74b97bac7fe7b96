// Precompiled once per build and read by every file of the library (Meson's cpp_pch): what nearly
// all of them include, {fmt} above all (core/text_format.hpp is in 156 of 166 files), parsed once
// instead of once per file, two to three seconds each. Only core's headers (the layer every layer
// may include); every file still includes what it uses.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text_format.hpp"
#include "tensortree/error.hpp"
#include "tensortree/tensor.hpp"
