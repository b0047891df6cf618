// The differences between the DALI releases the plugin builds against (1.x,
// as NVIDIA's containers ship, e.g. 1.53; and 2.x, e.g. 2.4), in one place.
// The operator sources include this header and use these names instead of
// the version-specific DALI ones.
//
// CQLSTREAM_DALI_MAJOR / CQLSTREAM_DALI_MINOR are set by
// plugins/dali/CMakeLists.txt from the DALI the build found.
//
// Thread safety and ownership: only type aliases and constants; as the DALI
// types they name.

#ifndef CQLSTREAM_PLUGINS_DALI_DALI_COMPAT_H_
#define CQLSTREAM_PLUGINS_DALI_DALI_COMPAT_H_

#include <dali/pipeline/util/thread_pool.h>

#ifndef CQLSTREAM_DALI_MAJOR
#error "CQLSTREAM_DALI_MAJOR is not set: build the plugin through plugins/dali/CMakeLists.txt"
#endif

namespace cqlstream::dali_plugin {

// DALI 2 renamed the pipeline's classic thread pool (dali/pipeline/util/thread_pool.h)
// to OldThreadPool; ThreadPool is its base class there. Same constructor
// (num_threads, device_id, set_affinity, name) and AddWork/RunAll/WaitForWork.
#if CQLSTREAM_DALI_MAJOR >= 2
using DaliThreadPool = ::dali::OldThreadPool;
#else
using DaliThreadPool = ::dali::ThreadPool;
#endif

// The device id of a thread pool that never touches a GPU.
// (DALIDataType's values are global in both releases: write DALI_INT64, not
// ::dali::DALI_INT64.)
inline constexpr int kCpuOnlyDeviceId = ::dali::CPU_ONLY_DEVICE_ID;

}  // namespace cqlstream::dali_plugin

#endif  // CQLSTREAM_PLUGINS_DALI_DALI_COMPAT_H_
