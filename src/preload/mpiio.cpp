// MPI-IO module: wrappers of MPI_File_* (cat "MPI-IO") through the MPI profiling interface.
//
// The calls are listed in src/format/calls.def (interface MPIIO). Each wrapper forwards to
// PMPI_<call> of the loaded MPI library (resolve_pmpi), so the MPI library's own MPI_File_*
// never calls back into us; nothing is resolved until the application makes its first MPI call,
// so a process that never loads MPI pays nothing. mpi4py loads libmpi with dlopen: the wrappers
// still interpose (the global scope, LD_PRELOAD first, is searched before the extension's own
// dependencies), and resolve_pmpi finds PMPI_* in that object even when it is not in the global
// scope (dl_iterate_phdr + dlopen(RTLD_NOLOAD)).
//
// A file handle is traced when MPI_File_open named a traced path (DFTRACER_DATA_DIR, as for
// POSIX); the handle -> path map is kept until MPI_File_close. Args (DFTRACER_INC_METADATA=1):
// fname, count (elements), type_size (bytes of one element, MPI_Type_size), size (count ×
// type_size, when the call returned MPI_SUCCESS: the reader's ARG_SIZE rule), offset_etypes
// (the explicit offset of the *_at forms, in etypes of the file view), ret (the MPI error code).
// A non-blocking call (MPI_File_i*) records the bytes it started, over the time of the start.
// MPI_Init / MPI_Init_thread: once MPI is up, the rank in MPI_COMM_WORLD is recorded as the
// trace's process_id metadata (Tracer::initialize), which the analyzer reads as the rank.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "preload.h"

using namespace dftracer;
using namespace dftracer::preload;

namespace dftracer::preload {

namespace {

// dl_iterate_phdr callback: the first loaded object that defines want->name.
struct Find {
  const char* name;
  void* found;
};

int find_in_object(struct dl_phdr_info* info, size_t, void* data) {
  Find* f = static_cast<Find*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return 0;
  f->found = dlsym(h, f->name);
  dlclose(h);  // NOLOAD took one more reference; the object stays loaded
  return f->found != nullptr ? 1 : 0;
}

// PMPI_<suffix> from the loaded MPI library, or null.
void* find_pmpi(const char* suffix) noexcept {
  char pname[96];
  size_t n = strlen(suffix);
  if (n + 6 > sizeof(pname)) return nullptr;
  memcpy(pname, "PMPI_", 5);
  memcpy(pname + 5, suffix, n + 1);
  void* p = dlsym(RTLD_NEXT, pname);
  if (p == nullptr) p = dlsym(RTLD_DEFAULT, pname);
  if (p == nullptr) {
    // libmpi dlopened RTLD_LOCAL (a Python extension's dependency): look into every loaded object.
    Find f{pname, nullptr};
    dl_iterate_phdr(find_in_object, &f);
    p = f.found;
  }
  return p;
}

}  // namespace

void* resolve_pmpi(const char* name) noexcept {
  void* p = find_pmpi(name + 4);
  if (p == nullptr) {
    // Our MPI_* wrapper was called, so an MPI library is loaded; without its PMPI_* entry point
    // the call cannot be forwarded.
    static const char msg[] = "dftracer preload: cannot resolve PMPI_ symbol of an MPI call, aborting\n";
    ssize_t rc = syscall(SYS_write, 2, msg, sizeof(msg) - 1);
    (void)rc;
    abort();
  }
  return p;
}

}  // namespace dftracer::preload

namespace {

constexpr std::string_view kCatMpiio = "MPI-IO";
constexpr int kMpiSuccess = 0;  // MPI_SUCCESS is 0 in every MPI implementation

bool mpiio_category() noexcept {
  static const bool on = [] {
    const Config& c = config();
    return c.enable && !c.disable_io;
  }();
  return on;
}

// The file handles opened on traced paths: handle -> path (one reference held by the map).
// Heap-allocated and never freed: MPI_File_close may run from atexit handlers after our statics
// would have been destroyed.
std::mutex g_files_mu;
std::unordered_map<void*, PathRef*>* g_files = nullptr;

// The traced path of handle fh with one reference for the caller (release it), or null.
PathRef* file_ref(MPI_File fh) noexcept {
  std::lock_guard<std::mutex> lk(g_files_mu);
  if (g_files == nullptr) return nullptr;
  auto it = g_files->find(fh);
  if (it == g_files->end()) return nullptr;
  FdTable::acquire(it->second);
  return it->second;
}

void file_set(MPI_File fh, PathRef* r) noexcept {
  std::lock_guard<std::mutex> lk(g_files_mu);
  if (g_files == nullptr) g_files = new std::unordered_map<void*, PathRef*>();
  auto [it, fresh] = g_files->emplace(fh, r);
  if (!fresh) {  // a handle MPI reused without our seeing its close
    FdTable::release(it->second);
    it->second = r;
  }
}

PathRef* file_take(MPI_File fh) noexcept {
  std::lock_guard<std::mutex> lk(g_files_mu);
  if (g_files == nullptr) return nullptr;
  auto it = g_files->find(fh);
  if (it == g_files->end()) return nullptr;
  PathRef* r = it->second;
  g_files->erase(it);
  return r;
}

// Records MPI_COMM_WORLD's rank as the process_id metadata, once MPI is initialised and tracing
// is active. MPI_COMM_WORLD is OpenMPI's (the address of ompi_mpi_comm_world); with another MPI
// no rank is recorded (docs/preload.md).
std::atomic<int> g_rank_state{0};  // 0 unknown, 1 recorded (or impossible)

void record_rank() noexcept {
  if (g_rank_state.load(std::memory_order_relaxed) != 0) return;
  if (g_state.tracer == nullptr || !g_state.tracer->active()) return;
  using initialized_fn = int (*)(int*);
  using rank_fn = int (*)(void*, int*);
  auto initialized = reinterpret_cast<initialized_fn>(find_pmpi("Initialized"));
  auto rank_of = reinterpret_cast<rank_fn>(find_pmpi("Comm_rank"));
  if (initialized == nullptr || rank_of == nullptr) return;
  int up = 0;
  if (initialized(&up) != kMpiSuccess || !up) return;
  void* world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
  if (world == nullptr) {
    Find f{"ompi_mpi_comm_world", nullptr};
    dl_iterate_phdr(find_in_object, &f);
    world = f.found;
  }
  int expected = 0;
  if (!g_rank_state.compare_exchange_strong(expected, 1)) return;
  int rank = -1;
  if (world == nullptr || rank_of(world, &rank) != kMpiSuccess || rank < 0) return;
  g_state.tracer->initialize(nullptr, nullptr, &rank);
}

// record_rank() once, as a recording of ours (nothing it calls is traced).
inline void ensure_rank() noexcept {
  if (DFT_LIKELY(g_rank_state.load(std::memory_order_relaxed) != 0)) return;
  Recording rec;
  record_rank();
}

int type_size(MPI_Datatype t) noexcept {
  using fn = int (*)(MPI_Datatype, int*);
  static fn f = reinterpret_cast<fn>(resolve_pmpi("MPI_Type_size"));
  int s = 0;
  if (f(t, &s) != kMpiSuccess) return -1;
  return s;
}

// Gate of a call on a file handle: the category is on, tracing is active, this thread may
// trace, and the handle was opened on a traced path. Returns the path (one reference) or null.
inline PathRef* traced_file(MPI_File fh) noexcept {
  if (DFT_LIKELY(!mpiio_category()) || !tracing_active() || !thread_may_trace()) return nullptr;
  return file_ref(fh);
}

// A call on a file handle: time it and emit one event with fname and fill(args, ret).
template <typename Call, typename Fill>
int file_op(std::string_view name, MPI_File fh, Call&& call, Fill&& fill) {
  PathRef* p = traced_file(fh);
  if (DFT_LIKELY(p == nullptr)) return call();
  ensure_rank();
  int64_t t0 = now_us();
  int ret = call();
  int64_t t1 = now_us();
  {
    Recording rec;
    emit(name, kCatMpiio, t0, t1, [&](ArgList& a) {
      a.add_raw(p->fname_fragment());
      fill(a, ret);
    });
  }
  FdTable::release(p);
  return ret;
}

// Data calls: count elements of datatype t; has_at: the *_at forms' explicit offset `at` (etypes).
template <typename Call>
int data_op(std::string_view name, MPI_File fh, bool has_at, long long at, int count, MPI_Datatype t, Call&& call) {
  return file_op(name, fh, call, [&](ArgList& a, int ret) {
    int ts = type_size(t);
    a.add_int("count", count);
    a.add_int("type_size", ts);
    if (ret == kMpiSuccess && ts >= 0 && count >= 0) a.add_int("size", int64_t(count) * ts);
    if (has_at) a.add_int("offset_etypes", at);
    a.add_int("ret", ret);
  });
}

// ROMIO accepts a file-system prefix ("ufs:/path", "nfs:/path"): the path is what follows it.
const char* strip_fs_prefix(const char* path) noexcept {
  const char* colon = strchr(path, ':');
  const char* slash = strchr(path, '/');
  if (colon != nullptr && colon - path >= 2 && (slash == nullptr || colon < slash)) return colon + 1;
  return path;
}

}  // namespace

DFT_EXPORT int MPI_Init(int* argc, char*** argv) {
  int ret = real_MPI_Init()(argc, argv);
  if (ret == kMpiSuccess && g_state.ready.load(std::memory_order_acquire) && thread_may_trace()) {
    Recording rec;
    record_rank();
  }
  return ret;
}

DFT_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int ret = real_MPI_Init_thread()(argc, argv, required, provided);
  if (ret == kMpiSuccess && g_state.ready.load(std::memory_order_acquire) && thread_may_trace()) {
    Recording rec;
    record_rank();
  }
  return ret;
}

DFT_EXPORT int MPI_File_open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  if (DFT_LIKELY(!mpiio_category()) || filename == nullptr || !tracing_active() || !thread_may_trace())
    return real_MPI_File_open()(comm, filename, amode, info, fh);
  char abs[kPathCap];
  int n = 0;
  if (!traced_path(AT_FDCWD, strip_fs_prefix(filename), abs, &n))
    return real_MPI_File_open()(comm, filename, amode, info, fh);
  ensure_rank();
  int64_t t0 = now_us();
  int ret = real_MPI_File_open()(comm, filename, amode, info, fh);
  int64_t t1 = now_us();
  Recording rec;
  std::string_view path(abs, size_t(n));
  if (ret == kMpiSuccess && fh != nullptr) {
    PathRef* r = FdTable::make(path);
    if (r != nullptr) file_set(*fh, r);
  }
  emit("MPI_File_open", kCatMpiio, t0, t1, [&](ArgList& a) {
    a.add_str("fname", path);
    a.add_int("amode", amode);
    a.add_int("ret", ret);
  });
  return ret;
}

DFT_EXPORT int MPI_File_close(MPI_File* fh) {
  if (fh == nullptr) return real_MPI_File_close()(fh);
  MPI_File h = *fh;  // MPI_File_close sets *fh to MPI_FILE_NULL
  PathRef* p = traced_file(h);
  if (DFT_LIKELY(p == nullptr)) {
    int ret = real_MPI_File_close()(fh);
    if (ret == kMpiSuccess) FdTable::release(file_take(h));  // traced at open, not now
    return ret;
  }
  int64_t t0 = now_us();
  int ret = real_MPI_File_close()(fh);
  int64_t t1 = now_us();
  Recording rec;
  emit("MPI_File_close", kCatMpiio, t0, t1, [&](ArgList& a) {
    a.add_raw(p->fname_fragment());
    a.add_int("ret", ret);
  });
  FdTable::release(p);
  if (ret == kMpiSuccess) FdTable::release(file_take(h));
  return ret;
}

DFT_EXPORT int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                                 const char* datarep, MPI_Info info) {
  return file_op(
      "MPI_File_set_view", fh, [&] { return real_MPI_File_set_view()(fh, disp, etype, filetype, datarep, info); },
      [&](ArgList& a, int ret) {
        a.add_int("disp", disp);
        a.add_int("etype_size", type_size(etype));
        a.add_int("filetype_size", type_size(filetype));
        a.add_str("datarep", datarep != nullptr ? std::string_view(datarep) : std::string_view());
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int MPI_File_sync(MPI_File fh) {
  return file_op(
      "MPI_File_sync", fh, [&] { return real_MPI_File_sync()(fh); },
      [](ArgList& a, int ret) { a.add_int("ret", ret); });
}

// The data calls: those without an explicit offset (individual, collective, shared, ordered
// pointers) and the *_at forms, blocking (MPI_Status*) and non-blocking (MPI_Request*).
#define DFT_MPI_DATA(name, buf_t, done_t) \
  DFT_EXPORT int name(MPI_File fh, buf_t buf, int count, MPI_Datatype t, done_t done) { \
    return data_op(#name, fh, false, 0, count, t, [&] { return real_##name()(fh, buf, count, t, done); }); \
  }
#define DFT_MPI_DATA_AT(name, buf_t, done_t) \
  DFT_EXPORT int name(MPI_File fh, MPI_Offset off, buf_t buf, int count, MPI_Datatype t, done_t done) { \
    return data_op(#name, fh, true, off, count, t, [&] { return real_##name()(fh, off, buf, count, t, done); }); \
  }

DFT_MPI_DATA(MPI_File_read, void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_read_all, void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_read_shared, void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_read_ordered, void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_write, const void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_write_all, const void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_write_shared, const void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_write_ordered, const void*, MPI_Status*)
DFT_MPI_DATA(MPI_File_iread, void*, MPI_Request*)
DFT_MPI_DATA(MPI_File_iread_all, void*, MPI_Request*)
DFT_MPI_DATA(MPI_File_iread_shared, void*, MPI_Request*)
DFT_MPI_DATA(MPI_File_iwrite, const void*, MPI_Request*)
DFT_MPI_DATA(MPI_File_iwrite_all, const void*, MPI_Request*)
DFT_MPI_DATA(MPI_File_iwrite_shared, const void*, MPI_Request*)
DFT_MPI_DATA_AT(MPI_File_read_at, void*, MPI_Status*)
DFT_MPI_DATA_AT(MPI_File_read_at_all, void*, MPI_Status*)
DFT_MPI_DATA_AT(MPI_File_write_at, const void*, MPI_Status*)
DFT_MPI_DATA_AT(MPI_File_write_at_all, const void*, MPI_Status*)
DFT_MPI_DATA_AT(MPI_File_iread_at, void*, MPI_Request*)
DFT_MPI_DATA_AT(MPI_File_iread_at_all, void*, MPI_Request*)
DFT_MPI_DATA_AT(MPI_File_iwrite_at, const void*, MPI_Request*)
DFT_MPI_DATA_AT(MPI_File_iwrite_at_all, const void*, MPI_Request*)
#undef DFT_MPI_DATA
#undef DFT_MPI_DATA_AT
