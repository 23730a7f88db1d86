//===- MpiJob.cpp - the trainer's collectives over MPI --------------------===//
//
// Data-parallel training calls MPI from the runtime (see docs/training.md):
// the compiled step hands each gradient to xfmr_all_reduce_f32, which ends
// here in one MPI_Allreduce. Built without MPI, a trainer refuses to run as
// one of several processes instead of training alone N times.
//
//===----------------------------------------------------------------------===//

#include "MpiJob.h"

#include "CommandLine.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#ifdef XFMR_HAVE_MPI
#include <mpi.h>
#endif

using namespace xfmr::rt;

namespace {

/// The size of the job, as the launcher (Open MPI's mpirun, or PMIx) tells
/// it before MPI_Init; 0 when no launcher started this process.
int launchedJobSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return std::getenv("PMIX_RANK") ? 1 : 0;
}

#ifdef XFMR_HAVE_MPI
class MpiJob final : public Collectives {
public:
  MpiJob() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rankValue);
    MPI_Comm_size(MPI_COMM_WORLD, &sizeValue);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rankValue, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &localSizeValue);
    MPI_Comm_free(&local);
  }
  int rank() const override { return rankValue; }
  int size() const override { return sizeValue; }
  int localSize() const override { return localSizeValue; }
  void sum(float *data, int64_t count) override { reduce(data, count, MPI_FLOAT); }
  void sum(double *data, int64_t count) override { reduce(data, count, MPI_DOUBLE); }
  void broadcast(void *data, size_t bytes) override {
    for (size_t done = 0; done < bytes; done += INT_MAX)
      MPI_Bcast(static_cast<char *>(data) + done,
                static_cast<int>(std::min<size_t>(bytes - done, INT_MAX)), MPI_BYTE, 0,
                MPI_COMM_WORLD);
  }

private:
  template <typename T> void reduce(T *data, int64_t count, MPI_Datatype type) {
    // MPI counts are ints: a larger tensor goes in pieces.
    for (int64_t done = 0; done < count; done += INT_MAX)
      MPI_Allreduce(MPI_IN_PLACE, data + done,
                    static_cast<int>(std::min<int64_t>(count - done, INT_MAX)), type, MPI_SUM,
                    MPI_COMM_WORLD);
  }
  int rankValue = 0, sizeValue = 1, localSizeValue = 1;
};
#endif

} // namespace

std::unique_ptr<Collectives> xfmr::rt::joinMpiJob(int *argc, char ***argv) {
  int launched = launchedJobSize();
  if (!launched)
    return nullptr;
#ifdef XFMR_HAVE_MPI
  MPI_Init(argc, argv);
  return std::make_unique<MpiJob>();
#else
  (void)argc;
  (void)argv;
  if (launched > 1)
    fail("this trainer was built without MPI, so it cannot run as one of " +
         std::to_string(launched) + " processes (install libopenmpi-dev and rebuild xfmr)");
  return nullptr;
#endif
}

void xfmr::rt::leaveMpiJob(std::unique_ptr<Collectives> job, int status) {
  if (!job)
    return;
#ifdef XFMR_HAVE_MPI
  if (status != 0)
    MPI_Abort(MPI_COMM_WORLD, status);
  MPI_Finalize();
#else
  (void)status;
#endif
}
