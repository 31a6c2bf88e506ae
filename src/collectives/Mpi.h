// <mpi.h> without Open MPI's deprecated C++ bindings: the tree links MPI::MPI_C only, and
// the bindings' inline classes would otherwise pull in undefined libmpi_cxx symbols.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
