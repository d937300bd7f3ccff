// The MPI types of the MPI-IO wrappers (src/format/calls.def, interface MPIIO), declared without
// <mpi.h> so the preload builds where no MPI is installed. Handles are only passed through to the
// PMPI_* functions, never looked into: a pointer-sized slot holds OpenMPI's pointer handles and
// MPICH's int handles alike (x86-64 and aarch64 pass both in one integer register); MPI_Offset is
// a 64-bit integer in both; MPI_Status is only ever a pointer.
#pragma once

#include <cstdint>

namespace dftracer::preload {

using MPI_Comm = void*;
using MPI_Info = void*;
using MPI_File = void*;
using MPI_Datatype = void*;
using MPI_Request = void*;
using MPI_Offset = long long;
struct MPI_Status;

}  // namespace dftracer::preload
