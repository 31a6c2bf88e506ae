// Turns MPI return codes into exceptions: every MPI call in this area goes through
// RINGTRAIN_MPI_CHECK, on communicators whose error handler is MPI_ERRORS_RETURN.
#pragma once

namespace ringtrain {

// Throws std::runtime_error "MPI error in <call> (<file>:<line>): <MPI error string>"
// when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* call, const char* file, int line);

}  // namespace ringtrain

#define RINGTRAIN_MPI_CHECK(call) ::ringtrain::check_mpi((call), #call, __FILE__, __LINE__)
