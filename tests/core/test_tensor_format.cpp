// Every expected string below is what PyTorch's repr() prints for the same tensor under the default
// print options (checked against torch/_tensor_str.py and a real PyTorch).
#include <catch2/catch.hpp>

#include <complex>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

#include "tensortree/tensor.hpp"

using tensortree::BFloat16;
using tensortree::Device;
using tensortree::DType;
using tensortree::Float8E4M3FN;
using tensortree::Half;
using tensortree::Shape;
using tensortree::Tensor;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A CPU tensor of `shape` holding `values` in C order.
template <class T>
Tensor tensor_of(const std::vector<T>& values, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), {tensortree::dtype_v<T>});
  REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <class T>
Tensor vector_of(const std::vector<T>& values) {
  return tensor_of(values, {static_cast<std::int64_t>(values.size())});
}

template <class T>
Tensor scalar_of(T value) {
  return tensor_of(std::vector<T>{value}, {});
}

// Narrow floating types built from floats, the way torch.tensor(..., dtype=...) rounds them.
template <class T>
Tensor narrow_vector_of(const std::vector<float>& values) {
  std::vector<T> narrowed;
  for (float v : values) narrowed.push_back(T(v));
  return vector_of(narrowed);
}

Tensor arange(Shape shape, double start = 1.0, double step = 1.0, DType dtype = DType::Float32) {
  return Tensor::arange(std::move(shape), start, step, {dtype});
}

}  // namespace

TEST_CASE("floats that are all integral print with a trailing point and no decimals") {
  CHECK(vector_of<float>({1, 2, 3}).str() == "tensor([1., 2., 3.])");
  CHECK(Tensor::zeros({3}).str() == "tensor([0., 0., 0.])");
  CHECK(vector_of<float>({100, -2000}).str() == "tensor([  100., -2000.])");
}

TEST_CASE("floats with fractions print with four decimals") {
  CHECK(vector_of<float>({0.1f, 2.5f}).str() == "tensor([0.1000, 2.5000])");
  CHECK(vector_of<float>({123456.5f, 1000.25f}).str() == "tensor([123456.5000,   1000.2500])");
  CHECK(vector_of<float>({-0.0f, 1.5f}).str() == "tensor([-0.0000, 1.5000])");
}

TEST_CASE("scientific notation when the range is wide, the largest is huge or the smallest is tiny") {
  CHECK(vector_of<float>({1, 1e5f}).str() == "tensor([1.0000e+00, 1.0000e+05])");
  CHECK(vector_of<float>({1, 2e8f}).str() == "tensor([1.0000e+00, 2.0000e+08])");
  CHECK(vector_of<float>({1e9f}).str() == "tensor([1.0000e+09])");
  CHECK(vector_of<float>({5e-5f, 1e-4f}).str() == "tensor([5.0000e-05, 1.0000e-04])");
  CHECK(vector_of<float>({1.5e-4f, 2}).str() == "tensor([1.5000e-04, 2.0000e+00])");
  CHECK(vector_of<float>({-1e-5f, 3}).str() == "tensor([-1.0000e-05,  3.0000e+00])");
}

TEST_CASE("inf and nan print bare and take no part in choosing the width") {
  CHECK(vector_of<double>({1, kInf, -kInf, kNaN}).str() ==
        "tensor([1., inf, -inf, nan], dtype=torch.float64)");
  CHECK(vector_of<float>({static_cast<float>(kNaN), 1.5f}).str() == "tensor([   nan, 1.5000])");
  CHECK(vector_of<float>({-static_cast<float>(kNaN)}).str() == "tensor([nan])");
  CHECK(scalar_of(static_cast<float>(kNaN)).str() == "tensor(nan)");
}

TEST_CASE("every element is right-aligned to the widest shown element") {
  CHECK(vector_of<float>({-1.5f, 2.25f, 10}).str() == "tensor([-1.5000,  2.2500, 10.0000])");
  CHECK(vector_of<std::int64_t>({1, -20, 300}).str() == "tensor([  1, -20, 300])");
  CHECK(vector_of<std::int8_t>({-128, 5}).str() == "tensor([-128,    5], dtype=torch.int8)");
}

TEST_CASE("integers print exactly, with a dtype suffix unless int64") {
  CHECK(vector_of<std::int32_t>({1, 2}).str() == "tensor([1, 2], dtype=torch.int32)");
  CHECK(vector_of<std::uint8_t>({0, 255}).str() == "tensor([  0, 255], dtype=torch.uint8)");
  CHECK(vector_of<std::int64_t>({9007199254740993}).str() == "tensor([9007199254740993])");
  CHECK(vector_of<std::uint64_t>({9007199254740993u}).str() ==
        "tensor([9007199254740993], dtype=torch.uint64)");
  CHECK(vector_of<std::uint16_t>({65535, 7}).str() == "tensor([65535,     7], dtype=torch.uint16)");
}

TEST_CASE("bools print as True and False, padded to the widest") {
  CHECK(vector_of<bool>({true, false}).str() == "tensor([ True, False])");
  CHECK(vector_of<bool>({true, true}).str() == "tensor([True, True])");
  CHECK(tensor_of<bool>({true, false, false, true}, {2, 2}).str() ==
        "tensor([[ True, False],\n        [False,  True]])");
}

TEST_CASE("complex numbers format real and imaginary parts separately") {
  using C = std::complex<float>;
  CHECK(vector_of<C>({{1, 2}, {3, -4}}).str() == "tensor([1.+2.j, 3.-4.j])");
  CHECK(vector_of<C>({{1.5f, -0.25f}, {-2, 1}}).str() ==
        "tensor([ 1.5000-0.2500j, -2.0000+1.0000j])");
  CHECK(vector_of<C>({{1, -0.0f}}).str() == "tensor([1.-0.j])");
  CHECK(vector_of<C>({{1, static_cast<float>(kNaN)}}).str() == "tensor([1.+nanj])");
  CHECK(tensor_of<C>({{1, 1}, {-0.0f, -1.5f}, {2, 0}, {0, 0}}, {2, 2}).str() ==
        "tensor([[1.+1.0000j, -0.-1.5000j],\n        [2.+0.0000j, 0.+0.0000j]])");
  CHECK(vector_of<std::complex<double>>({{1, 1}}).str() == "tensor([1.+1.j], dtype=torch.complex128)");
}

TEST_CASE("0-dim tensors print their single value without brackets") {
  CHECK(scalar_of(3.0f).str() == "tensor(3.)");
  CHECK(scalar_of(3.25f).str() == "tensor(3.2500)");
  CHECK(scalar_of(1e-5f).str() == "tensor(1.0000e-05)");
  CHECK(scalar_of<std::int64_t>(7).str() == "tensor(7)");
  CHECK(scalar_of<std::int32_t>(7).str() == "tensor(7, dtype=torch.int32)");
  CHECK(scalar_of(true).str() == "tensor(True)");
  CHECK(scalar_of(std::complex<float>(1.5f, 2)).str() == "tensor(1.5000+2.j)");
  CHECK(scalar_of(std::complex<float>(1, 2)).str() == "tensor(1.+2.j)");
}

TEST_CASE("nested dimensions break lines, with a blank line per dimension beyond the second") {
  CHECK(arange({2, 3}).str() == "tensor([[1., 2., 3.],\n        [4., 5., 6.]])");
  CHECK(arange({3, 1}).str() == "tensor([[1.],\n        [2.],\n        [3.]])");
  CHECK(arange({2, 2, 2}).str() ==
        "tensor([[[1., 2.],\n         [3., 4.]],\n\n        [[5., 6.],\n         [7., 8.]]])");
  CHECK(arange({2, 2, 2, 2}).str() ==
        "tensor([[[[ 1.,  2.],\n          [ 3.,  4.]],\n\n"
        "         [[ 5.,  6.],\n          [ 7.,  8.]]],\n\n\n"
        "        [[[ 9., 10.],\n          [11., 12.]],\n\n"
        "         [[13., 14.],\n          [15., 16.]]]])");
}

TEST_CASE("a non-contiguous view prints its elements in logical order") {
  CHECK(arange({2, 3}).transpose(0, 1).str() ==
        "tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]])");
  CHECK(arange({6}).slice(0, {0, 6, 2}).str() == "tensor([1., 3., 5.])");
}

TEST_CASE("long rows wrap at 80 columns under the opening bracket") {
  CHECK(arange({30}).str() ==
        "tensor([ 1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13., 14.,\n"
        "        15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27., 28.,\n"
        "        29., 30.])");
  CHECK(arange({2, 20}, 1.5, 1.5).str() ==
        "tensor([[ 1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000, 12.0000,\n"
        "         13.5000, 15.0000, 16.5000, 18.0000, 19.5000, 21.0000, 22.5000, 24.0000,\n"
        "         25.5000, 27.0000, 28.5000, 30.0000],\n"
        "        [31.5000, 33.0000, 34.5000, 36.0000, 37.5000, 39.0000, 40.5000, 42.0000,\n"
        "         43.5000, 45.0000, 46.5000, 48.0000, 49.5000, 51.0000, 52.5000, 54.0000,\n"
        "         55.5000, 57.0000, 58.5000, 60.0000]])");
}

TEST_CASE("more than 1000 elements are summarized with ... and only shown ones set the format") {
  CHECK(arange({1001}, 0, 1, DType::Int64).str() == "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
  CHECK(arange({40, 30}, 0, 1, DType::Int64).str() ==
        "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n"
        "        [  30,   31,   32,  ...,   57,   58,   59],\n"
        "        [  60,   61,   62,  ...,   87,   88,   89],\n"
        "        ...,\n"
        "        [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n"
        "        [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n"
        "        [1170, 1171, 1172,  ..., 1197, 1198, 1199]])");
  CHECK(arange({1001, 2}, 0, 1, DType::Int32).str() ==
        "tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n"
        "        [1996, 1997],\n        [1998, 1999],\n        [2000, 2001]], dtype=torch.int32)");
}

TEST_CASE("summarized rows wrap with the ... marker counted as an element") {
  Tensor ones_then_million = Tensor::full({1001}, 1.0);
  ones_then_million.at<float>({1000}) = 1e6f;
  CHECK(ones_then_million.str() ==
        "tensor([1.0000e+00, 1.0000e+00, 1.0000e+00,  ..., 1.0000e+00, 1.0000e+00,\n"
        "        1.0000e+06])");
  std::vector<std::complex<float>> diagonal;
  for (int i = 0; i < 1002; ++i) diagonal.emplace_back(static_cast<float>(i), static_cast<float>(i));
  CHECK(vector_of(diagonal).str() ==
        "tensor([0.0000e+00+0.0000e+00j, 1.0000e+00+1.0000e+00j, 2.0000e+00+2.0000e+00j,\n"
        "         ..., 9.9900e+02+9.9900e+02j, 1.0000e+03+1.0000e+03j,\n"
        "        1.0010e+03+1.0010e+03j])");
}

TEST_CASE("summarized 3-D tensors put ... between blocks, separated by blank lines") {
  const std::string expected =
      "tensor([[[   1,    2,    3,  ...,    9,   10,   11],\n"
      "         [  12,   13,   14,  ...,   20,   21,   22],\n"
      "         [  23,   24,   25,  ...,   31,   32,   33],\n"
      "         ...,\n"
      "         [  78,   79,   80,  ...,   86,   87,   88],\n"
      "         [  89,   90,   91,  ...,   97,   98,   99],\n"
      "         [ 100,  101,  102,  ...,  108,  109,  110]],\n\n"
      "        [[ 111,  112,  113,  ...,  119,  120,  121],\n"
      "         [ 122,  123,  124,  ...,  130,  131,  132],\n"
      "         [ 133,  134,  135,  ...,  141,  142,  143],\n"
      "         ...,\n"
      "         [ 188,  189,  190,  ...,  196,  197,  198],\n"
      "         [ 199,  200,  201,  ...,  207,  208,  209],\n"
      "         [ 210,  211,  212,  ...,  218,  219,  220]],\n\n"
      "        [[ 221,  222,  223,  ...,  229,  230,  231],\n"
      "         [ 232,  233,  234,  ...,  240,  241,  242],\n"
      "         [ 243,  244,  245,  ...,  251,  252,  253],\n"
      "         ...,\n"
      "         [ 298,  299,  300,  ...,  306,  307,  308],\n"
      "         [ 309,  310,  311,  ...,  317,  318,  319],\n"
      "         [ 320,  321,  322,  ...,  328,  329,  330]],\n\n"
      "        ...,\n\n"
      "        [[ 881,  882,  883,  ...,  889,  890,  891],\n"
      "         [ 892,  893,  894,  ...,  900,  901,  902],\n"
      "         [ 903,  904,  905,  ...,  911,  912,  913],\n"
      "         ...,\n"
      "         [ 958,  959,  960,  ...,  966,  967,  968],\n"
      "         [ 969,  970,  971,  ...,  977,  978,  979],\n"
      "         [ 980,  981,  982,  ...,  988,  989,  990]],\n\n"
      "        [[ 991,  992,  993,  ...,  999, 1000, 1001],\n"
      "         [1002, 1003, 1004,  ..., 1010, 1011, 1012],\n"
      "         [1013, 1014, 1015,  ..., 1021, 1022, 1023],\n"
      "         ...,\n"
      "         [1068, 1069, 1070,  ..., 1076, 1077, 1078],\n"
      "         [1079, 1080, 1081,  ..., 1087, 1088, 1089],\n"
      "         [1090, 1091, 1092,  ..., 1098, 1099, 1100]],\n\n"
      "        [[1101, 1102, 1103,  ..., 1109, 1110, 1111],\n"
      "         [1112, 1113, 1114,  ..., 1120, 1121, 1122],\n"
      "         [1123, 1124, 1125,  ..., 1131, 1132, 1133],\n"
      "         ...,\n"
      "         [1178, 1179, 1180,  ..., 1186, 1187, 1188],\n"
      "         [1189, 1190, 1191,  ..., 1197, 1198, 1199],\n"
      "         [1200, 1201, 1202,  ..., 1208, 1209, 1210]]])";
  CHECK(arange({11, 10, 11}, 1, 1, DType::Int64).str() == expected);
}

TEST_CASE("empty tensors print [] with their size unless 1-D and their dtype unless float32") {
  CHECK(Tensor::empty({0}).str() == "tensor([])");
  CHECK(Tensor::empty({0, 3}).str() == "tensor([], size=(0, 3))");
  CHECK(Tensor::empty({2, 0, 4}).str() == "tensor([], size=(2, 0, 4))");
  CHECK(Tensor::empty({0}, {DType::Int64}).str() == "tensor([], dtype=torch.int64)");
  CHECK(Tensor::empty({0}, {DType::Bool}).str() == "tensor([], dtype=torch.bool)");
  CHECK(Tensor::empty({0}, {DType::Complex64}).str() == "tensor([], dtype=torch.complex64)");
  CHECK(Tensor::empty({2, 0}, {DType::Int32}).str() == "tensor([], size=(2, 0), dtype=torch.int32)");
}

TEST_CASE("16- and 8-bit floats print through float and name their dtype") {
  CHECK(narrow_vector_of<Half>({0.1f, 1}).str() == "tensor([0.1000, 1.0000], dtype=torch.float16)");
  CHECK(narrow_vector_of<Half>({1, 2048}).str() ==
        "tensor([1.0000e+00, 2.0480e+03], dtype=torch.float16)");
  CHECK(narrow_vector_of<Half>({70000}).str() == "tensor([inf], dtype=torch.float16)");
  CHECK(narrow_vector_of<BFloat16>({0.1f, 3}).str() ==
        "tensor([0.1001, 3.0000], dtype=torch.bfloat16)");
  CHECK(narrow_vector_of<Float8E4M3FN>({0.3f, 2}).str() ==
        "tensor([0.3125, 2.0000], dtype=torch.float8_e4m3fn)");
  CHECK(vector_of<double>({0.5}).str() == "tensor([0.5000], dtype=torch.float64)");
}

TEST_CASE("a suffix that would pass 80 columns goes on its own line under the contents") {
  CHECK(arange({8}, 1.25, 1.25, DType::Float64).str() ==
        "tensor([ 1.2500,  2.5000,  3.7500,  5.0000,  6.2500,  7.5000,  8.7500, 10.0000],\n"
        "       dtype=torch.float64)");
  CHECK(arange({12}, 1.25, 1.25, DType::Float64).str() ==
        "tensor([ 1.2500,  2.5000,  3.7500,  5.0000,  6.2500,  7.5000,  8.7500, 10.0000,\n"
        "        11.2500, 12.5000, 13.7500, 15.0000], dtype=torch.float64)");
}

TEST_CASE("suffix wrapping counts the last line two characters longer, as PyTorch does") {
  // 61 characters + ", dtype=torch.int32" would end at column 80, yet PyTorch breaks the line.
  CHECK(arange({6}, 1000000, 1, DType::Int32).str() ==
        "tensor([1000000, 1000001, 1000002, 1000003, 1000004, 1000005],\n       dtype=torch.int32)");
  CHECK(arange({5}, 1000000, 1, DType::Int32).str() ==
        "tensor([1000000, 1000001, 1000002, 1000003, 1000004], dtype=torch.int32)");
}

TEST_CASE("a CUDA tensor names its device before its dtype") {
  // An empty CUDA tensor prints without touching device memory, so this runs on any machine.
  const Tensor empty_on_gpu =
      Tensor::from_blob(nullptr, {0}, DType::Int32, Device::cuda(0), [](void*) {});
  CHECK(empty_on_gpu.str() == "tensor([], device='cuda:0', dtype=torch.int32)");
}

TEST_CASE("an undefined tensor says so, and operator<< prints str()") {
  CHECK(Tensor().str() == "tensor(undefined)");
  std::ostringstream os;
  os << vector_of<std::int64_t>({4, 5});
  CHECK(os.str() == "tensor([4, 5])");
}
