// Errors that every rank hears about: local work that all ranks do alike (validating the
// configuration, loading data, building the model, opening logs) runs here, and if it
// fails on any rank, every rank throws the same CollectiveError. No rank is left waiting
// in a collective for a peer that failed, and no rank's message is lost to MPI_Abort.
#pragma once

#include <functional>

#include "collectives/Communicator.h"

namespace ringtrain {

// Runs work(); then all ranks compare outcomes. If any rank threw, every rank throws
// CollectiveError with the lowest failing rank's message (exit code 2 for
// std::invalid_argument, a configuration error; 1 otherwise). Must be called by all ranks.
void run_agreed(Communicator& comm, const std::function<void()>& work);

}  // namespace ringtrain
