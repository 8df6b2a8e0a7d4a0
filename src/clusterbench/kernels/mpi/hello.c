/* hello.c: can this cluster run MPI? (cluster preflight)
 *
 * Every rank starts (MPI_Init, timed from the launcher's view by the caller), reports where it runs
 * (cb_mpi_report_placement: host, cpus), then the ranks exchange data two ways: an allreduce of the
 * rank numbers (every rank must get 0 + 1 + ... + n-1) and a ring send/receive of each rank's number
 * (each rank must receive its left neighbour's). Rank 0 prints a validation record (ok only when
 * every rank saw the right values) and one result: the seconds from MPI_Init's return on rank 0
 * to the end of the checks (metric "exchange_s").
 */
#include "cb_common.h"
#include "cb_mpi.h"

#include <mpi.h>

int main(int argc, char **argv) {
    int rank, nranks;
    cb_mpi_start(&argc, &argv, &rank, &nranks, 0);
    double t0 = MPI_Wtime();
    cb_mpi_report_placement(rank, nranks, NULL, NULL);
    long long mine = rank, sum = 0, want = (long long)nranks * (nranks - 1) / 2;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks, got = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int ok = sum == want && got == left, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0;
    if (rank == 0) {
        cb_validation(all_ok, all_ok ? "allreduce and ring exchange correct on every rank"
                                     : "a rank received a wrong value");
        if (all_ok) {
            cb_json_begin("result");
            cb_json_str("metric", "exchange_s");
            cb_json_str("unit", "s");
            cb_json_nums("samples", &dt, 1);
            cb_json_end();
        }
    }
    (void)argv;
    return cb_mpi_finish(rank, -1);
}
