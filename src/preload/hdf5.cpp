// HDF5 module: wrappers of HDF5's file, group, dataset and attribute calls (cat "HDF5";
// docs/preload.md "HDF5").
//
// The calls are listed in src/format/calls.def (interface HDF5); real.h declares their real
// functions, which resolve on first use in whichever loaded object defines them
// (resolve_loaded): also h5py's bundled libhdf5, loaded RTLD_LOCAL by its extension modules,
// which dlsym(RTLD_NEXT) does not search. Our definitions still interpose there, because a
// module's lookups search the global scope (the executable and LD_PRELOAD) before its own.
//
// An event is recorded when the call's file is a traced path: the path argument of
// H5Fopen/H5Fcreate, else the file of the object id (H5Fget_name). The real call runs outside
// any Recording, so the POSIX calls HDF5 makes inside it are traced as usual (nested events).
// The names and byte counts come from HDF5 functions we do not intercept, called through their
// real pointers inside a Recording, only on ids H5Iis_valid accepts (an invalid id would print
// HDF5's error stack on the application's stderr).
//
// Args (with DFTRACER_INC_METADATA=1): fname (the file, absolute), dname (the object's path in
// the file, H5Iget_name; for H5Aopen_by_name/H5Acreate2/H5Aopen the object the attribute is on),
// aname (attribute name), flags (H5Fopen/H5Fcreate), scope (H5Fflush), size (H5Dread/H5Dwrite/
// H5Aread/H5Awrite: bytes of the memory selection), ret (the id or status returned).
#include <fcntl.h>
#include <stdio.h>
#include <sys/types.h>

#include "preload.h"

using namespace dftracer;
using namespace dftracer::preload;

namespace {

constexpr std::string_view kCatHdf5 = "HDF5";
// H5S_ALL (every HDF5), H5S_BLOCK and H5S_PLIST (HDF5 >= 1.14): reserved dataspace ids.
constexpr hid_t kSpaceAll = 0, kSpaceBlock = 1, kSpacePlist = 2;

using htri_t = int;
using hssize_t = int64_t;

// HDF5 functions used for names and sizes, not intercepted: resolved where the intercepted ones
// are (resolve_loaded), on first use.
struct Aux {
  const char* name;
  std::atomic<void*> fn{nullptr};
  template <typename F>
  F get() noexcept {
    void* p = fn.load(std::memory_order_relaxed);
    if (p == nullptr) {
      p = resolve_loaded(name);
      fn.store(p, std::memory_order_relaxed);
    }
    return reinterpret_cast<F>(p);
  }
};
Aux aux_is_valid{"H5Iis_valid"}, aux_fget_name{"H5Fget_name"}, aux_iget_name{"H5Iget_name"},
    aux_aget_name{"H5Aget_name"}, aux_npoints{"H5Sget_select_npoints"}, aux_tsize{"H5Tget_size"},
    aux_dspace{"H5Dget_space"}, aux_aspace{"H5Aget_space"}, aux_sclose{"H5Sclose"}, aux_itype{"H5Iget_type"},
    aux_iref{"H5Iget_ref"};

bool valid(hid_t id) noexcept {
  auto f = aux_is_valid.get<htri_t (*)(hid_t)>();
  return id > 0 && f != nullptr && f(id) > 0;
}

// A name read by one of HDF5's get_name calls into a fixed buffer (a longer one is left out of
// the args). Files: kPathCap; objects and attributes: 1 KiB (a wrapper holds up to three).
template <size_t Cap>
struct NameBuf {
  char s[Cap];
  int n = -1;
  std::string_view view() const noexcept { return n > 0 ? std::string_view(s, size_t(n)) : std::string_view(); }
};
using FileName = NameBuf<kPathCap>;
using Name = NameBuf<1024>;

// The object's path in its file (H5Iget_name), when the id is valid and has one.
void object_name(hid_t id, Name& out) noexcept {
  auto f = aux_iget_name.get<ssize_t (*)(hid_t, char*, size_t)>();
  if (f == nullptr) return;
  ssize_t n = f(id, out.s, sizeof out.s);
  out.n = n > 0 && size_t(n) < sizeof out.s ? int(n) : -1;
}

void attribute_name(hid_t id, Name& out) noexcept {
  auto f = aux_aget_name.get<ssize_t (*)(hid_t, size_t, char*)>();
  if (f == nullptr) return;
  ssize_t n = f(id, sizeof out.s, out.s);
  out.n = n > 0 && size_t(n) < sizeof out.s ? int(n) : -1;
}

// True when `id` is valid and its file is a traced path; `file` gets the absolute file name.
bool traced_object(hid_t id, FileName& file) noexcept {
  if (!valid(id)) return false;
  auto f = aux_fget_name.get<ssize_t (*)(hid_t, char*, size_t)>();
  if (f == nullptr) return false;
  char raw[kPathCap];
  ssize_t n = f(id, raw, sizeof raw);
  if (n <= 0 || size_t(n) >= sizeof raw) return false;
  return traced_path(AT_FDCWD, raw, file.s, &file.n);
}

// Points of a selection (H5Sget_select_npoints), or -1.
hssize_t npoints(hid_t space) noexcept {
  auto f = aux_npoints.get<hssize_t (*)(hid_t)>();
  return f != nullptr ? f(space) : -1;
}

// Points of a dataset's or attribute's whole dataspace, or -1.
hssize_t extent_points(Aux& get_space, hid_t id) noexcept {
  auto f = get_space.get<hid_t (*)(hid_t)>();
  auto close = aux_sclose.get<herr_t (*)(hid_t)>();
  if (f == nullptr || close == nullptr) return -1;
  hid_t s = f(id);
  if (s < 0) return -1;
  hssize_t n = npoints(s);
  close(s);
  return n;
}

// Bytes of points × the memory type's size, or -1 when either is unknown.
int64_t bytes_of(hssize_t points, hid_t mem_type) noexcept {
  auto f = aux_tsize.get<size_t (*)(hid_t)>();
  if (points < 0 || f == nullptr) return -1;
  size_t t = f(mem_type);
  int64_t b = 0;
  if (t == 0 || __builtin_mul_overflow(int64_t(points), int64_t(t), &b)) return -1;
  return b;
}

// Bytes H5Dread/H5Dwrite moved: the memory selection's points × the memory type's size. H5S_ALL
// or H5S_BLOCK as the memory space: the file selection's points; H5S_ALL as both: the dataset's
// whole extent. H5S_PLIST (selections in the transfer property list): unknown (-1).
int64_t dataset_bytes(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space) noexcept {
  hid_t sel = (mem_space == kSpaceAll || mem_space == kSpaceBlock) ? file_space : mem_space;
  if (sel == kSpacePlist || file_space == kSpacePlist) return -1;
  hssize_t points = sel == kSpaceAll ? extent_points(aux_dspace, dset) : npoints(sel);
  return bytes_of(points, mem_type);
}

// A wrapper's real function was asked for while no loaded object defines it (a weak reference
// made non-null by our definition): fail as HDF5 fails, saying why once.
template <typename R>
R missing(const char* name) noexcept {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    int e = errno;
    fprintf(stderr, "dftracer: %s called but no loaded library defines it; returning -1\n", name);
    errno = e;
  }
  return R(-1);
}

bool hdf5_on() noexcept { return gate(g_state.hdf5); }

// Opening or creating a file: traced when the path is.
template <typename Call>
hid_t file_open(std::string_view event, const char* path, unsigned flags, Call&& call) {
  if (DFT_LIKELY(!hdf5_on())) return call();
  FileName file;
  if (!traced_path(AT_FDCWD, path, file.s, &file.n)) return call();
  int64_t t0 = now_us();
  hid_t ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(event, kCatHdf5, t0, t1, [&](ArgList& a) {
    a.add_str("fname", file.view());
    a.add_int("flags", int64_t(flags));
    a.add_int("ret", ret);
  });
  return ret;
}

// A call on an object that stays valid after it (reads, writes, flush, opening or creating a
// child of `loc`): traced when the object's file is. extra(ArgList&, ret) adds the call's own
// args; it runs inside the Recording, after the call.
template <typename R, typename Call, typename Extra>
R object_op(std::string_view event, hid_t loc, Call&& call, Extra&& extra) {
  if (DFT_LIKELY(!hdf5_on())) return call();
  FileName file;
  {
    Recording rec;
    if (!traced_object(loc, file)) file.n = -1;
  }
  if (file.n < 0) return call();
  int64_t t0 = now_us();
  R ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(event, kCatHdf5, t0, t1, [&](ArgList& a) {
    a.add_str("fname", file.view());
    extra(a, ret);
    a.add_int("ret", int64_t(ret));
  });
  return ret;
}

enum class Kind { kFile, kObject, kAttribute };

// Closing an object: its names are read before the call (the id is gone after it).
template <typename Call>
herr_t close_op(std::string_view event, hid_t id, Kind kind, Call&& call) {
  if (DFT_LIKELY(!hdf5_on())) return call();
  FileName file;
  Name obj, attr;
  {
    Recording rec;
    if (!traced_object(id, file)) file.n = -1;
    else if (g_state.metadata && kind != Kind::kFile) {
      object_name(id, obj);
      if (kind == Kind::kAttribute) attribute_name(id, attr);
    }
  }
  if (file.n < 0) return call();
  int64_t t0 = now_us();
  herr_t ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(event, kCatHdf5, t0, t1, [&](ArgList& a) {
    a.add_str("fname", file.view());
    if (obj.n > 0) a.add_str("dname", obj.view());
    if (attr.n > 0) a.add_str("aname", attr.view());
    a.add_int("ret", ret);
  });
  return ret;
}

// extra for calls that return a new object id: its path in the file.
inline auto kNewObject = [](ArgList& a, hid_t ret) {
  Name n;
  if (ret >= 0) object_name(ret, n);
  if (n.n > 0) a.add_str("dname", n.view());
};

// extra for calls that return a new attribute id: the object it is on and its name.
inline auto kNewAttribute = [](ArgList& a, hid_t ret) {
  Name obj, attr;
  if (ret >= 0) {
    object_name(ret, obj);
    attribute_name(ret, attr);
  }
  if (obj.n > 0) a.add_str("dname", obj.view());
  if (attr.n > 0) a.add_str("aname", attr.view());
};

}  // namespace

#define DFT_REAL(name, ...) \
  auto f = real_##name(); \
  if (DFT_UNLIKELY(f == nullptr)) return missing<decltype(f(__VA_ARGS__))>(#name); \
  auto call = [&] { return f(__VA_ARGS__); }

// ============================================================================ files
DFT_EXPORT hid_t H5Fcreate(const char* name, unsigned flags, hid_t fcpl, hid_t fapl) {
  DFT_REAL(H5Fcreate, name, flags, fcpl, fapl);
  return file_open("H5Fcreate", name, flags, call);
}

DFT_EXPORT hid_t H5Fopen(const char* name, unsigned flags, hid_t fapl) {
  DFT_REAL(H5Fopen, name, flags, fapl);
  return file_open("H5Fopen", name, flags, call);
}

DFT_EXPORT herr_t H5Fflush(hid_t id, int scope) {
  DFT_REAL(H5Fflush, id, scope);
  return object_op<herr_t>("H5Fflush", id, call, [&](ArgList& a, herr_t) { a.add_int("scope", scope); });
}

DFT_EXPORT herr_t H5Fclose(hid_t id) {
  DFT_REAL(H5Fclose, id);
  return close_op("H5Fclose", id, Kind::kFile, call);
}

// ============================================================================ groups
DFT_EXPORT hid_t H5Gcreate2(hid_t loc, const char* name, hid_t lcpl, hid_t gcpl, hid_t gapl) {
  DFT_REAL(H5Gcreate2, loc, name, lcpl, gcpl, gapl);
  return object_op<hid_t>("H5Gcreate2", loc, call, kNewObject);
}

DFT_EXPORT hid_t H5Gopen2(hid_t loc, const char* name, hid_t gapl) {
  DFT_REAL(H5Gopen2, loc, name, gapl);
  return object_op<hid_t>("H5Gopen2", loc, call, kNewObject);
}

DFT_EXPORT herr_t H5Gclose(hid_t id) {
  DFT_REAL(H5Gclose, id);
  return close_op("H5Gclose", id, Kind::kObject, call);
}

// ============================================================================ datasets
DFT_EXPORT hid_t H5Dcreate2(hid_t loc, const char* name, hid_t type, hid_t space, hid_t lcpl, hid_t dcpl, hid_t dapl) {
  DFT_REAL(H5Dcreate2, loc, name, type, space, lcpl, dcpl, dapl);
  return object_op<hid_t>("H5Dcreate2", loc, call, kNewObject);
}

DFT_EXPORT hid_t H5Dopen2(hid_t loc, const char* name, hid_t dapl) {
  DFT_REAL(H5Dopen2, loc, name, dapl);
  return object_op<hid_t>("H5Dopen2", loc, call, kNewObject);
}

DFT_EXPORT herr_t H5Dread(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void* buf) {
  DFT_REAL(H5Dread, dset, mem_type, mem_space, file_space, dxpl, buf);
  return object_op<herr_t>("H5Dread", dset, call, [&](ArgList& a, herr_t ret) {
    Name n;
    object_name(dset, n);
    if (n.n > 0) a.add_str("dname", n.view());
    int64_t b = ret >= 0 ? dataset_bytes(dset, mem_type, mem_space, file_space) : -1;
    if (b >= 0) a.add_int("size", b);
  });
}

DFT_EXPORT herr_t H5Dwrite(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void* buf) {
  DFT_REAL(H5Dwrite, dset, mem_type, mem_space, file_space, dxpl, buf);
  return object_op<herr_t>("H5Dwrite", dset, call, [&](ArgList& a, herr_t ret) {
    Name n;
    object_name(dset, n);
    if (n.n > 0) a.add_str("dname", n.view());
    int64_t b = ret >= 0 ? dataset_bytes(dset, mem_type, mem_space, file_space) : -1;
    if (b >= 0) a.add_int("size", b);
  });
}

DFT_EXPORT herr_t H5Dclose(hid_t id) {
  DFT_REAL(H5Dclose, id);
  return close_op("H5Dclose", id, Kind::kObject, call);
}

// ============================================================================ objects
// h5py opens existing groups and datasets with H5Oopen (and drops them with H5Idec_ref).
DFT_EXPORT hid_t H5Oopen(hid_t loc, const char* name, hid_t lapl) {
  DFT_REAL(H5Oopen, loc, name, lapl);
  return object_op<hid_t>("H5Oopen", loc, call, kNewObject);
}

DFT_EXPORT herr_t H5Oclose(hid_t id) {
  DFT_REAL(H5Oclose, id);
  return close_op("H5Oclose", id, Kind::kObject, call);
}

// h5py releases every id with H5Idec_ref (ObjectID.__dealloc__, File.close): recorded when it
// drops the last reference of a file, group or dataset id (H5I_FILE 1, H5I_GROUP 2, H5I_DATASET
// 5: the same in every HDF5 >= 1.8), i.e. closes it; args.type says which.
DFT_EXPORT int H5Idec_ref(hid_t id) {
  DFT_REAL(H5Idec_ref, id);
  if (DFT_LIKELY(!hdf5_on())) return call();
  FileName file;
  Name obj;
  std::string_view type;
  {
    Recording rec;
    auto get_type = aux_itype.get<int (*)(hid_t)>();
    auto get_ref = aux_iref.get<int (*)(hid_t)>();
    if (get_type != nullptr && get_ref != nullptr && valid(id)) {
      int t = get_type(id);
      type = t == 1 ? "file" : t == 2 ? "group" : t == 5 ? "dataset" : std::string_view();
      if (!type.empty() && (get_ref(id) != 1 || !traced_object(id, file))) type = std::string_view();
      if (!type.empty() && t != 1 && g_state.metadata) object_name(id, obj);
    }
  }
  if (type.empty()) return call();
  int64_t t0 = now_us();
  int ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit("H5Idec_ref", kCatHdf5, t0, t1, [&](ArgList& a) {
    a.add_str("fname", file.view());
    if (obj.n > 0) a.add_str("dname", obj.view());
    a.add_str("type", type);
    a.add_int("ret", ret);
  });
  return ret;
}

// ============================================================================ attributes
DFT_EXPORT hid_t H5Acreate2(hid_t loc, const char* name, hid_t type, hid_t space, hid_t acpl, hid_t aapl) {
  DFT_REAL(H5Acreate2, loc, name, type, space, acpl, aapl);
  return object_op<hid_t>("H5Acreate2", loc, call, kNewAttribute);
}

// h5py creates attributes with H5Acreate_by_name(obj, ".", name, ...).
DFT_EXPORT hid_t H5Acreate_by_name(hid_t loc, const char* obj_name, const char* attr_name, hid_t type, hid_t space,
                                   hid_t acpl, hid_t aapl, hid_t lapl) {
  DFT_REAL(H5Acreate_by_name, loc, obj_name, attr_name, type, space, acpl, aapl, lapl);
  return object_op<hid_t>("H5Acreate_by_name", loc, call, kNewAttribute);
}

DFT_EXPORT hid_t H5Aopen(hid_t obj, const char* name, hid_t aapl) {
  DFT_REAL(H5Aopen, obj, name, aapl);
  return object_op<hid_t>("H5Aopen", obj, call, kNewAttribute);
}

DFT_EXPORT hid_t H5Aopen_by_name(hid_t loc, const char* obj_name, const char* attr_name, hid_t aapl, hid_t lapl) {
  DFT_REAL(H5Aopen_by_name, loc, obj_name, attr_name, aapl, lapl);
  return object_op<hid_t>("H5Aopen_by_name", loc, call, kNewAttribute);
}

DFT_EXPORT herr_t H5Aread(hid_t attr, hid_t mem_type, void* buf) {
  DFT_REAL(H5Aread, attr, mem_type, buf);
  return object_op<herr_t>("H5Aread", attr, call, [&](ArgList& a, herr_t ret) {
    kNewAttribute(a, attr);
    int64_t b = ret >= 0 ? bytes_of(extent_points(aux_aspace, attr), mem_type) : -1;
    if (b >= 0) a.add_int("size", b);
  });
}

DFT_EXPORT herr_t H5Awrite(hid_t attr, hid_t mem_type, const void* buf) {
  DFT_REAL(H5Awrite, attr, mem_type, buf);
  return object_op<herr_t>("H5Awrite", attr, call, [&](ArgList& a, herr_t ret) {
    kNewAttribute(a, attr);
    int64_t b = ret >= 0 ? bytes_of(extent_points(aux_aspace, attr), mem_type) : -1;
    if (b >= 0) a.add_int("size", b);
  });
}

DFT_EXPORT herr_t H5Aclose(hid_t id) {
  DFT_REAL(H5Aclose, id);
  return close_op("H5Aclose", id, Kind::kAttribute, call);
}
