// The libtorch bridge (tensortree/torch.hpp): zero-copy both ways, every shared dtype, strided
// views, ownership kept right in both directions, and trees as maps of ATen tensors.
#include <catch2/catch.hpp>

#include <tensortree/torch.hpp>

#include <complex>
#include <cstdint>
#include <vector>

using namespace tensortree;

namespace {

const std::vector<DType> kShared = {DType::Bool,    DType::UInt8,    DType::Int8,      DType::Int16,
                                    DType::Int32,   DType::Int64,    DType::Float16,   DType::BFloat16,
                                    DType::Float32, DType::Float64,  DType::Complex64, DType::Complex128};

// Non-zero, position-dependent values (bool: a pattern of both values).
Tensor patterned(const Shape& shape, DType dtype, int seed) {
  if (dtype == DType::Bool) {
    Tensor t = Tensor::empty(shape, {DType::Bool});
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<bool>()[i] = (i + seed) % 3 != 0;
    return t;
  }
  return Tensor::arange(shape, 1.0 + seed, 1.0, {dtype});
}

// Every element of `ours` equals the same element of `theirs`, read through each library's own view.
void require_same_values(const Tensor& ours, const at::Tensor& theirs) {
  REQUIRE(static_cast<std::size_t>(theirs.dim()) == ours.shape().size());
  for (std::int64_t d = 0; d < ours.dim(); ++d) REQUIRE(theirs.size(d) == ours.size(d));
  const at::Tensor flat = theirs.reshape({-1});
  for (std::int64_t i = 0; i < ours.numel(); ++i) {
    const c10::complex<double> value = flat[i].item().toComplexDouble();
    REQUIRE(std::complex<double>(value.real(), value.imag()) == ours.value_at_linear(i));
  }
}

}  // namespace

TEST_CASE("to_torch views the tensor's memory with its shape, strides and dtype, for every shared dtype") {
  for (const DType dtype : kShared) {
    INFO(dtype_name(dtype));
    const Tensor ours = patterned({3, 4}, dtype, 2);
    const at::Tensor theirs = to_torch(ours);
    CHECK(theirs.data_ptr() == ours.data_ptr());
    CHECK(theirs.scalar_type() == tensortree::detail::torch_dtype(dtype));
    require_same_values(ours, theirs);
  }
}

TEST_CASE("strided views cross both ways without a copy") {
  const Tensor base = patterned({4, 6}, DType::Float32, 1);
  const Tensor view = base.transpose(0, 1).slice(0, {1, 6, 2});  // shape [3, 4], strides [2, 6]
  const at::Tensor theirs = to_torch(view);
  CHECK(theirs.data_ptr() == view.data_ptr());
  CHECK(theirs.strides().vec() == std::vector<std::int64_t>(view.strides().begin(), view.strides().end()));
  require_same_values(view, theirs);

  const at::Tensor aten_base = at::arange(24, at::kLong).reshape({4, 6});
  const at::Tensor aten_view = aten_base.t().slice(0, 1, 6, 2);
  const Tensor back = from_torch(aten_view);
  CHECK(back.data_ptr() == aten_view.data_ptr());
  require_same_values(back, aten_view);
}

TEST_CASE("from_torch views ATen memory for every shared dtype") {
  for (const DType dtype : kShared) {
    INFO(dtype_name(dtype));
    const at::Tensor theirs = to_torch(patterned({5, 2}, dtype, 3)).clone();  // memory ATen owns
    const Tensor ours = from_torch(theirs);
    CHECK(ours.data_ptr() == theirs.data_ptr());
    CHECK(ours.dtype() == dtype);
    require_same_values(ours, theirs);
  }
}

TEST_CASE("writes through either side are seen by the other") {
  const Tensor ours = patterned({8}, DType::Int32, 0);
  const at::Tensor theirs = to_torch(ours);
  theirs.mul_(3);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(ours.at<std::int32_t>({i}) == 3 * static_cast<std::int32_t>(i + 1));
  ours.fill_(-7);
  CHECK(theirs.eq(-7).all().item<bool>());
}

TEST_CASE("each side keeps the other's memory alive, and it is freed exactly once") {
  SECTION("a tensortree buffer handed to ATen") {
    int frees = 0;
    std::vector<float> values = {1.5f, -2.0f, 3.25f, 9.0f};
    at::Tensor theirs;
    {
      const Tensor ours = Tensor::from_blob(values.data(), {4}, DType::Float32, Device::cpu(),
                                            [&frees](void*) { ++frees; });
      theirs = to_torch(ours);
    }
    CHECK(frees == 0);
    CHECK(theirs[3].item<float>() == 9.0f);
    theirs.reset();
    CHECK(frees == 1);
  }
  SECTION("an ATen buffer handed to tensortree") {
    int frees = 0;
    std::vector<std::int64_t> values = {4, 5, 6};
    Tensor ours;
    {
      const at::Tensor theirs = at::from_blob(values.data(), {3}, [&frees](void*) { ++frees; }, at::kLong);
      ours = from_torch(theirs);
    }
    CHECK(frees == 0);
    CHECK(ours.at<std::int64_t>({2}) == 6);
    ours = Tensor();
    CHECK(frees == 1);
  }
}

TEST_CASE("dtypes this libtorch lacks and undefined tensors are refused by name") {
  CHECK_THROWS_AS(to_torch(Tensor::zeros({2}, {DType::Float8_e4m3fn})), NotSupported);
  CHECK_THROWS_AS(to_torch(Tensor()), InvalidArgument);
  CHECK_THROWS_AS(from_torch(at::Tensor()), InvalidArgument);
  try {
    (void)to_torch(Tensor::zeros({2}, {DType::UInt32}));
    FAIL("uint32 crossed into a libtorch without it");
  } catch (const NotSupported& e) {
    CHECK(std::string(e.what()).find("uint32") != std::string::npos);
  }
}

TEST_CASE("a tree becomes a map or a c10::Dict of views under dotted names, and a map becomes a tree") {
  TensorTree tree(Shape{2});
  tree.set("obs", patterned({2, 3}, DType::Float32, 1));
  tree.set("next.reward", patterned({2}, DType::Float64, 2));
  tree.set("next.done", patterned({2}, DType::Bool, 0));

  const std::map<std::string, at::Tensor> map = to_torch_map(tree);
  REQUIRE(map.size() == 3);
  for (const auto& [name, theirs] : map) {
    INFO(name);
    const Tensor& ours = tree.get(name);
    CHECK(theirs.data_ptr() == ours.data_ptr());
    require_same_values(ours, theirs);
  }

  const c10::Dict<std::string, at::Tensor> dict = to_torch_dict(tree);
  REQUIRE(dict.size() == 3);
  CHECK(dict.at("next.reward").data_ptr() == tree.get("next.reward").data_ptr());

  const TensorTree back = from_torch(map, Shape{2});
  CHECK(back.batch_size() == Shape{2});
  CHECK(back.subtree("next").contains("done"));
  CHECK(back.equal(tree.select({"obs", "next.reward", "next.done"})));
  CHECK(back.get("obs").data_ptr() == tree.get("obs").data_ptr());
}
