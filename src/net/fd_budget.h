// Copyright (c) cqlstream authors.
//
// How many connections a session may hold without running the process out
// of file descriptors: at most half of the soft RLIMIT_NOFILE, less the
// descriptors open for anything else (files, other sessions, the
// framework's), so that the rest of the process keeps at least as many as
// our connections take. The default soft limit of 1024 leaves about 480
// connections to a session in a process with ~60 other descriptors.
//
// Thread-safety: the functions are thread-safe (they read the process's
// limit and /proc/self/fd). Ownership: nothing is kept.
#ifndef CQLSTREAM_NET_FD_BUDGET_H_
#define CQLSTREAM_NET_FD_BUDGET_H_

namespace cqlstream::net {

// Descriptors open in this process (entries of /proc/self/fd); -1 when it
// cannot be read.
int OpenDescriptors();

// The connections a session that holds `own_connections` of them may hold
// in all: soft limit / 2 - (open descriptors - own_connections), at least 1.
// Pure form: the limit and the count of open descriptors given.
int ConnectionBudget(long soft_limit, int open_descriptors, int own_connections);
// The same for this process now.
int ConnectionBudget(int own_connections);

}  // namespace cqlstream::net

#endif  // CQLSTREAM_NET_FD_BUDGET_H_
