// The engine's own communicators (control messages, data, administration), made once per
// communicator the engine runs on and handed to every later engine on the same ranks.
//
// They are never freed: a peer's last stop notice or timeline batch can still be on its way when an
// engine stops, and Open MPI gives a freed communicator's context to the next one made, where such a
// late message takes the place of a real one in the sender's sequence and the real one is never
// matched (seen as a lost request after shutdown(); init()). Kept, the next engine receives the late
// message itself and drops it by its epoch (see ControlChannel).
#pragma once

#include <mpi.h>

namespace hvd {

struct EngineComms {
  MPI_Comm ctrl = MPI_COMM_NULL, data = MPI_COMM_NULL, admin = MPI_COMM_NULL;
};

// Collective over `parent`: the communicators of an earlier engine on a congruent communicator (same
// ranks in the same order), or new duplicates of `parent`.
EngineComms engine_comms(MPI_Comm parent);

}  // namespace hvd
