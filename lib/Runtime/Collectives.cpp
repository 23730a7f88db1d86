//===- Collectives.cpp - the job the compiled step reduces over -----------===//

#include "Collectives.h"

#include "xfmr-rt/xfmr_runtime.h"

using namespace xfmr::rt;

namespace {
Collectives alone;
Collectives *job = &alone;
} // namespace

Collectives &xfmr::rt::currentJob() { return *job; }

void xfmr::rt::setCurrentJob(Collectives *newJob) { job = newJob ? newJob : &alone; }

static float *weighted(uintptr_t address, int64_t count, float weight) {
  float *data = reinterpret_cast<float *>(address);
  if (weight != 1.0f)
    for (int64_t i = 0; i < count; ++i)
      data[i] *= weight;
  return data;
}

extern "C" void xfmr_all_reduce_f32(uintptr_t address, int64_t count, float weight) {
  job->sum(weighted(address, count, weight), count);
}

extern "C" void xfmr_all_reduce_start_f32(uintptr_t address, int64_t count, float weight) {
  job->startSum(weighted(address, count, weight), count);
}

extern "C" void xfmr_all_reduce_wait_f32(uintptr_t address) {
  job->finishSum(reinterpret_cast<float *>(address));
}
