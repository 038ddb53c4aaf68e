"""The thread pools of the numerical libraries, on the ground floor: a job's process sets them to its CPUs
(tabbench/run/isolation.py) and ``tabbench report`` to one a worker (tabbench/report/site.py), so that neither
package borrows from the other."""

#: The thread pools of the numerical libraries (OpenMP, MKL, OpenBLAS), read when a process loads them.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
