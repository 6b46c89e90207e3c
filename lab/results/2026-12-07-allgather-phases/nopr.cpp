// Does a posted pairwise exchange move its bytes while no rank calls MPI? Each rank Isends
// BYTES to every other rank and Irecvs from each, then computes (no MPI) for IDLE ms, then
// tests in a yield loop; prints how long the loop took. IDLE=0: tests from the start.
#include <mpi.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, p; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &p);
  const int bytes = atoi(argv[1]); const int idle_ms = atoi(argv[2]); const int reps = 12;
  std::vector<char> out(bytes, 1), in(static_cast<size_t>(bytes) * p);
  for (int rep = 0; rep < reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<MPI_Request> req(2 * (p - 1));
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 1; s < p; ++s) MPI_Irecv(in.data() + (size_t)s * bytes, bytes, MPI_BYTE, (r - s + p) % p, 7, MPI_COMM_WORLD, &req[s - 1]);
    for (int s = 1; s < p; ++s) MPI_Isend(out.data(), bytes, MPI_BYTE, (r + s) % p, 7, MPI_COMM_WORLD, &req[p - 2 + s]);
    auto t1 = std::chrono::steady_clock::now();
    // idle: spin on the clock (like computing) without MPI calls
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(idle_ms)) {}
    auto t2 = std::chrono::steady_clock::now();
    long tests = 0; int done = 0;
    while (!done) { MPI_Testall((int)req.size(), req.data(), &done, MPI_STATUSES_IGNORE); ++tests; if (!done) std::this_thread::yield(); }
    auto t3 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    if (rep >= 2) printf("rank %d post %.2f ms, idle %.2f, then test loop %.2f ms (%ld tests), total %.2f\n", r, ms(t0, t1), ms(t1, t2), ms(t2, t3), tests, ms(t0, t3));
  }
  MPI_Finalize();
}
