//===- RandomWeights.cpp - freshly initialised weights files ----*- C++ -*-===//

#include "xfmr/Driver/Compiler.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <random>

using namespace xfmr;

llvm::Error xfmr::writeRandomWeights(const ModelSignature &signature, llvm::StringRef path,
                                     uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<std::vector<float>> data;
  std::vector<xfmr_tensor_ref> refs;
  for (const rt::ArgSpec &argument : signature.manifest.args) {
    if (argument.kind != rt::ArgSpec::Kind::Param)
      continue;
    size_t count = 1;
    for (int64_t d : argument.shape)
      count *= d;
    std::vector<float> values(count);
    for (float &value : values)
      value = argument.init == "zeros"  ? 0.0f
              : argument.init == "ones" ? 1.0f
                                        : normal(generator);
    data.push_back(std::move(values));
    refs.push_back({argument.name.c_str(), XFMR_DTYPE_F32,
                    static_cast<int32_t>(argument.shape.size()), argument.shape.data(),
                    data.back().data()});
  }
  char err[512];
  std::string file = path.str();
  if (xfmr_safetensors_write(file.c_str(), refs.data(), refs.size(), err, sizeof(err)))
    return llvm::createStringError(err);
  return llvm::Error::success();
}
