//===- MpiJob.cpp - the trainer's collectives over MPI --------------------===//
//
// Data-parallel training calls MPI from the runtime (see docs/training.md):
// the compiled step hands each gradient to xfmr_all_reduce_f32, which ends
// here in one MPI_Allreduce, or to xfmr_all_reduce_start_f32 and
// xfmr_all_reduce_wait_f32 (MPI_Iallreduce, MPI_Wait). Built without MPI, a
// trainer refuses to run as one of several processes instead of training
// alone N times.
//
//===----------------------------------------------------------------------===//

#include "MpiJob.h"

#include "CommandLine.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

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
  void startSum(float *data, int64_t count) override {
    // Open MPI moves a non-blocking collective along inside MPI calls
    // only: each start also advances those in flight.
    if (!requests.empty()) {
      int allDone;
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &allDone,
                  MPI_STATUSES_IGNORE);
    }
    for (int64_t done = 0; done < count; done += INT_MAX) {
      requests.push_back(MPI_REQUEST_NULL);
      addresses.push_back(data);
      MPI_Iallreduce(MPI_IN_PLACE, data + done,
                     static_cast<int>(std::min<int64_t>(count - done, INT_MAX)), MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &requests.back());
    }
  }
  void finishSum(float *data) override {
    size_t kept = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (addresses[i] == data)
        MPI_Wait(&requests[i], MPI_STATUS_IGNORE);
      if (requests[i] != MPI_REQUEST_NULL) {
        requests[kept] = requests[i];
        addresses[kept++] = addresses[i];
      }
    }
    requests.resize(kept);
    addresses.resize(kept);
  }
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
  /// The reductions in flight, and the data each reduces.
  std::vector<MPI_Request> requests;
  std::vector<float *> addresses;
};
#endif

} // namespace

std::unique_ptr<Collectives> xfmr::rt::joinMpiJob(int *argc, char ***argv) {
  int launched = launchedJobSize();
  if (!launched)
    return nullptr;
#ifdef XFMR_HAVE_MPI
  // The step calls MPI on the main thread, at times inside an OpenMP team
  // (xfmr-merge-parallel-regions' omp.master).
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (provided < MPI_THREAD_FUNNELED)
    fail("the MPI library cannot be called from inside OpenMP threads (MPI_THREAD_FUNNELED)");
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
