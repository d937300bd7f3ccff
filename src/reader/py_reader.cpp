// pybind11 module dfanalyzer._reader (contract: docs/design.md, "Reader binding"). Conversion
// only: every rule lives in the C++ reader (batch_loader.h, reader.h). Columns are handed to
// NumPy without a copy: one heap ColumnOwner owns every vector and a capsule holding it is the
// base of each array.
#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <time.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../format/event.h"
#include "batch_loader.h"
#include "reader.h"

namespace py = pybind11;
using namespace dftracer::reader;

namespace {

std::string opt(const py::object& o) { return o.is_none() ? std::string() : py::str(o).cast<std::string>(); }

// `columns`: None = every args column; else an iterable of column names whose args columns are
// built (core column names in it are allowed: core columns are always built).
// `extra`: with `columns`, the args keys left out go to args_extra instead of being dropped.
ArgsProjection projection(const py::object& columns, bool extra = false) {
  if (columns.is_none()) return {};
  if (py::isinstance<py::str>(columns)) throw py::type_error("columns must be an iterable of column names, not a str");
  std::vector<std::string> names;
  for (auto c : columns) names.push_back(py::str(c).cast<std::string>());
  return ArgsProjection::only(std::move(names), extra);
}

// The checkpoint dicts' keys, made once per index: not 12 new key strings per checkpoint, which
// were most of the index hand-off's CPU (4,093 checkpoints per 100M events, part of the threaded
// summary's serial start-up; docs/perf/i28-boot.md). Same dicts, same key order.
struct CheckpointKeys {
  py::str number{"number"};
  py::str compressed_offset{"compressed_offset"};
  py::str compressed_size{"compressed_size"};
  py::str uncompressed_offset{"uncompressed_offset"};
  py::str uncompressed_size{"uncompressed_size"};
  py::str first_line{"first_line"};
  py::str num_lines{"num_lines"};
  py::str bit_offset{"bit_offset"};
  py::str flags{"flags"};
  py::str lost{"lost"};
  py::str lost_lines{"lost_lines"};
  py::str header_mismatch{"header_mismatch"};
};

py::dict checkpoint_dict(const Checkpoint& c, const CheckpointKeys& k) {
  py::dict d;
  auto put = [&d](const py::str& key, const py::object& value) {
    if (PyDict_SetItem(d.ptr(), key.ptr(), value.ptr()) != 0) throw py::error_already_set();
  };
  put(k.number, py::int_(c.number));
  put(k.compressed_offset, py::int_(c.compressed_offset));
  put(k.compressed_size, py::int_(c.compressed_size));
  put(k.uncompressed_offset, py::int_(c.uncompressed_offset));
  put(k.uncompressed_size, py::int_(c.uncompressed_size));
  put(k.first_line, py::int_(c.first_line));
  put(k.num_lines, py::int_(c.num_lines));
  put(k.bit_offset, py::int_(c.bit_offset));
  put(k.flags, py::int_(c.flags));
  put(k.lost, py::bool_(bool(c.flags & kLost)));
  put(k.lost_lines, py::int_(c.lost_lines));
  put(k.header_mismatch, py::bool_(bool(c.flags & kHeaderMismatch)));
  return d;
}

py::dict info_dict(const IndexInfo& i) {
  py::dict d;
  d["path"] = i.path;
  d["index_path"] = i.index_path;
  d["kind"] = index_kind_name(i.kind);
  d["size"] = i.size;
  d["mtime"] = double(i.mtime_ns) / 1e9;
  d["lines"] = i.lines;
  d["compressed_bytes"] = i.compressed_bytes;
  d["uncompressed_bytes"] = i.uncompressed_bytes;
  d["truncated_bytes"] = i.truncated_bytes;
  d["lost_bytes"] = i.lost_bytes;
  d["lost_lines"] = i.lost_lines;
  d["header_mismatches"] = i.header_mismatches;
  d["rebuilt"] = i.rebuilt;
  // Events counted by an earlier scan() of this index (None until then: building an index of
  // member files reads their headers only).
  d["events"] = i.stats_scanned ? py::object(py::int_(i.events)) : py::object(py::none());
  d["in_memory"] = i.index_path.empty();
  d["warnings"] = i.warnings;
  py::list cps;
  const CheckpointKeys keys;
  for (auto& c : i.checkpoints) cps.append(checkpoint_dict(c, keys));
  d["checkpoints"] = cps;
  return d;
}

py::dict scan_dict(const IndexInfo& i) {
  py::dict d = info_dict(i);
  d["events"] = i.events;
  d["metadata_records"] = i.metadata_records;
  d["skipped_lines"] = i.skipped_lines;
  d["read_lost_lines"] = i.scan_lost_lines;
  d["read_lost_bytes"] = i.scan_lost_bytes;
  d["read_header_mismatches"] = i.scan_header_mismatches;
  d["hostname"] = i.context.hostname;
  d["context_sizes"] = py::dict(py::arg("FH") = i.context.fh.size(), py::arg("HH") = i.context.hh.size(),
                                py::arg("SH") = i.context.sh.size());
  return d;
}

// Owner of all column storage handed to NumPy (the base capsule of every array).
struct ColumnOwner {
  ParsedBatch batch;
  std::vector<std::vector<int8_t>> codes8;
  std::vector<std::vector<int16_t>> codes16;
  // Filled by prepare() before the GIL is taken back: each dictionary column's codes as handed
  // to NumPy (narrowed: 8 or 16 and an index into codes8/codes16; 32: its own codes) and its
  // non-null rows; each args column's non-null rows, by position in batch.columns.args.
  struct Codes {
    int width = 32;
    size_t index = 0;
    int64_t valid = 0;
  };
  std::map<const DictColumn*, Codes> codes;
  std::vector<int64_t> arg_valid;
};

// The int32 code vectors of dictionary columns, once narrowed to pandas' code width (below), are
// kept by the thread and given to the five core dictionary columns of its next batch (the parser
// only reserves them): under Dask's workers every freed block of >= 128 KiB goes back to the
// system (MALLOC_TRIM_THRESHOLD_, docs/perf/i22-reserve.md), so a fresh code vector was fresh
// memory, a page fault per 4 KiB, in every batch. At most kPoolVectors vectors of at most
// kPoolCodes codes each are kept (8 MiB per thread).
constexpr size_t kPoolVectors = 8;
constexpr size_t kPoolCodes = size_t(1) << 18;
thread_local std::vector<ColumnVector<int32_t>> t_code_pool;

void seed_codes(EventColumns& c) {
  for (auto* d : {&c.name, &c.cat, &c.ph, &c.hostname, &c.fname}) {
    if (t_code_pool.empty()) return;
    d->codes = std::move(t_code_pool.back());
    t_code_pool.pop_back();
    d->codes.clear();
  }
}

void recycle_codes(ColumnVector<int32_t>& v) {
  if (v.capacity() > 0 && v.capacity() <= kPoolCodes && t_code_pool.size() < kPoolVectors) {
    // (its rows' pages stay resident: the next batch's parser need not populate them again)
    size_t cap = v.capacity() * sizeof(int32_t), used = v.size() * sizeof(int32_t);
    if (cap >= kColumnBlockMin && used > 0)
      column_block_note_resident(v.data(),
                                 std::min(cap, (used + kPopulateBytes - 1) / kPopulateBytes * kPopulateBytes));
    v.clear();
    t_code_pool.push_back(std::move(v));
  }
  ColumnVector<int32_t>().swap(v);
}

// Bytes equal to 0 in [p, p + n) (the non-null rows of a mask). std::count's loop is not
// vectorised for a byte array here (~3 instructions a byte); this is ~0.2.
int64_t count_zero_bytes(const uint8_t* p, size_t n) {
  int64_t c = 0;
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  while (i + 16 <= n) {
    size_t blocks = std::min<size_t>((n - i) / 16, 255);  // a byte lane counts to 255
    __m128i acc = zero;
    for (size_t b = 0; b < blocks; ++b, i += 16)
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), zero));
    __m128i s = _mm_sad_epu8(acc, zero);
    c += _mm_cvtsi128_si64(s) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s));
  }
#endif
  for (; i < n; ++i) c += p[i] == 0;
  return c;
}

// The work on the columns that needs no Python object, done while the GIL is released: the
// dictionary codes narrowed to pandas' code width (below) and the non-null rows of each column.
void narrow(ColumnOwner& b, DictColumn& d, bool count_valid) {
  ColumnOwner::Codes& k = b.codes[&d];
  if (count_valid) k.valid = int64_t(std::count_if(d.codes.begin(), d.codes.end(), [](int32_t x) { return x >= 0; }));
  size_t n = d.categories.size();
  if (n < 127) {
    b.codes8.emplace_back(d.codes.begin(), d.codes.end());
    recycle_codes(d.codes);
    k.width = 8;
    k.index = b.codes8.size() - 1;
  } else if (n < 32767) {
    b.codes16.emplace_back(d.codes.begin(), d.codes.end());
    recycle_codes(d.codes);
    k.width = 16;
    k.index = b.codes16.size() - 1;
  }
}
void prepare(ColumnOwner& b) {
  EventColumns& c = b.batch.columns;
  // (reserved up front so that views stay valid)
  b.codes8.reserve(8 + c.args.size());
  b.codes16.reserve(8 + c.args.size());
  for (auto* d : {&c.name, &c.cat, &c.ph, &c.hostname, &c.fname}) narrow(b, *d, false);
  b.arg_valid.assign(c.args.size(), 0);
  for (size_t i = 0; i < c.args.size(); ++i) {
    ArgColumn& a = c.args[i];
    if (a.type == ArgType::String) {
      narrow(b, a.strings, true);
      b.arg_valid[i] = b.codes[&a.strings].valid;
    } else {
      b.arg_valid[i] = count_zero_bytes(a.mask.data(), a.mask.size());
    }
  }
}

template <typename T, typename A>
py::array view(std::vector<T, A>& v, const py::capsule& base) {
  return py::array_t<T>({py::ssize_t(v.size())}, {py::ssize_t(sizeof(T))}, v.data(), base);
}

template <typename A>
py::array mask_view(std::vector<uint8_t, A>& v, const py::capsule& base) {
  return py::array(py::dtype("bool"), {py::ssize_t(v.size())}, {py::ssize_t(1)}, v.data(), base);
}

// Dictionary column -> (codes array with pandas' code dtype for that many categories, categories
// list). pandas keeps codes as int8 below 127 categories, int16 below 32,767 and int32 above
// (coerce_indexer_dtype in pandas/core/arrays/categorical.py), so Categorical.from_codes takes
// these without a copy. The codes were narrowed by prepare().
py::tuple dict_view(ColumnOwner& b, DictColumn& d, const py::capsule& base) {
  py::list cats;
  for (auto& s : d.categories)
    cats.append(py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), py::ssize_t(s.size()), "replace")));
  const ColumnOwner::Codes& k = b.codes.at(&d);
  py::array codes = k.width == 8    ? view(b.codes8[k.index], base)
                    : k.width == 16 ? view(b.codes16[k.index], base)
                                    : view(d.codes, base);
  return py::make_tuple(codes, cats);
}

// Hands the columns of `b` to Python (NumPy views owned by a capsule).
py::dict batch_dict(std::unique_ptr<ColumnOwner> guard) {
  ColumnOwner* b = guard.get();
  // (Codes vectors are reserved up front so that views stay valid.)
  EventColumns& c = b->batch.columns;
  py::capsule base(guard.release(), [](void* p) { delete static_cast<ColumnOwner*>(p); });
  py::dict out;
  out["rows"] = c.rows;
  py::dict core;
  core["name"] = dict_view(*b, c.name, base);
  core["cat"] = dict_view(*b, c.cat, base);
  core["ph"] = dict_view(*b, c.ph, base);
  core["hostname"] = dict_view(*b, c.hostname, base);
  core["fname"] = dict_view(*b, c.fname, base);
  core["pid"] = view(c.pid, base);
  core["tid"] = view(c.tid, base);
  core["ts"] = view(c.ts, base);
  core["dur"] = view(c.dur, base);
  core["te"] = view(c.te, base);
  core["size"] = py::make_tuple(view(c.size, base), mask_view(c.size_mask, base));
  core["offset"] = py::make_tuple(view(c.offset, base), mask_view(c.offset_mask, base));
  out["core"] = core;
  py::list args;
  py::dict arg_counts;  // args column -> events with a value (the analyzer's global column choice)
  for (size_t i = 0; i < c.args.size(); ++i) {
    ArgColumn& a = c.args[i];
    int64_t n = b->arg_valid[i];
    if (a.type == ArgType::String) {
      args.append(py::make_tuple(a.key, "string", dict_view(*b, a.strings, base)));
    } else {
      py::tuple payload = py::make_tuple(a.type == ArgType::Int ? view(a.ints, base) : view(a.floats, base),
                                         mask_view(a.mask, base));
      args.append(py::make_tuple(a.key, a.type == ArgType::Int ? "Int64" : "Float64", payload));
    }
    arg_counts[py::str(a.key)] = n;
  }
  out["args"] = args;
  out["arg_counts"] = arg_counts;
  py::dict meta;
  py::list mn, mc, mph, mk, mv, ma, mpid, mtid, mts, mdur;
  for (auto& m : c.metadata) {
    mn.append(m.name);
    mc.append(m.cat);
    mph.append(m.ph);
    mk.append(m.key);
    mv.append(m.value);
    ma.append(m.args);
    mpid.append(m.pid);
    mtid.append(m.tid);
    mts.append(m.has_ts ? py::object(py::int_(m.ts)) : py::object(py::none()));
    mdur.append(m.has_dur ? py::object(py::int_(m.dur)) : py::object(py::none()));
  }
  meta["name"] = mn;
  meta["cat"] = mc;
  meta["ph"] = mph;
  meta["pid"] = mpid;
  meta["tid"] = mtid;
  meta["ts"] = mts;
  meta["dur"] = mdur;
  meta["key"] = mk;
  meta["value"] = mv;
  meta["args"] = ma;
  out["metadata"] = meta;
  out["skipped_lines"] = c.skipped_lines;
  out["skipped_examples"] = c.skipped_examples;
  out["lost_bytes"] = b->batch.lost_bytes;
  out["lost_lines"] = b->batch.lost_lines;
  out["header_mismatches"] = b->batch.header_mismatches;
  out["warnings"] = b->batch.warnings;
  out["unresolved_hashes"] = c.unresolved_hashes;
  out["replaced_utf8_lines"] = c.replaced_utf8_lines;
  out["ts_out_of_range_lines"] = c.ts_out_of_range_lines;
  out["negative_dur_lines"] = c.negative_dur_lines;
  py::dict extra;
  for (auto& [k, n] : c.extra_keys) extra[py::str(k)] = n;
  out["extra_keys"] = extra;
  return out;
}

VerifiedLines checked_lines(const std::string& path, int64_t first_line, int64_t n_lines, const std::string& idir) {
  py::gil_scoped_release nogil;
  return read_lines_verified(path, first_line, n_lines, idir);
}

py::dict lines_dict(const VerifiedLines& c) {
  py::dict d;
  py::list lines;
  for (auto& s : c.result.lines)
    lines.append(py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), py::ssize_t(s.size()), "replace")));
  d["lines"] = lines;
  d["lost_lines"] = c.result.lost_lines;
  d["lost_bytes"] = c.result.lost_bytes;
  d["warnings"] = c.result.warnings;
  d["reindexed"] = c.reindexed;
  return d;
}

py::dict load_batch_py(const std::string& path, int64_t first, int64_t last, const py::object& index_dir,
                       const py::object& columns, bool extra) {
  auto owner = std::make_unique<ColumnOwner>();
  seed_codes(owner->batch.columns);
  std::string idir = opt(index_dir);
  ArgsProjection args = projection(columns, extra);
  {
    py::gil_scoped_release nogil;
    load_batch_into(owner->batch, path, first, last, idir, args);
    prepare(*owner);
  }
  return batch_dict(std::move(owner));
}

py::list files_list(const std::vector<FileLoad>& files);

py::dict load_files_py(const std::vector<std::string>& paths, const py::object& columns, bool extra) {
  auto owner = std::make_unique<ColumnOwner>();
  seed_codes(owner->batch.columns);
  std::vector<FileLoad> files;
  ArgsProjection args = projection(columns, extra);
  {
    py::gil_scoped_release nogil;
    files = load_files_into(owner->batch, paths, args);
    prepare(*owner);
  }
  py::dict out = batch_dict(std::move(owner));
  out["files"] = files_list(files);
  return out;
}

// load_files' per-file rows.
py::list files_list(const std::vector<FileLoad>& files) {
  py::list fl;
  for (auto& f : files) {
    py::dict d;
    d["path"] = f.path;
    d["error"] = f.error.empty() ? py::object(py::none()) : py::object(py::str(f.error));
    d["kind"] = f.indexed ? index_kind_name(f.kind) : "";
    d["lines"] = f.lines;
    d["compressed_bytes"] = f.compressed_bytes;
    d["uncompressed_bytes"] = f.uncompressed_bytes;
    d["checkpoints"] = f.checkpoints;
    d["rows"] = f.rows;
    d["skipped_lines"] = f.skipped_lines;
    d["ts_out_of_range_lines"] = f.ts_out_of_range_lines;
    d["negative_dur_lines"] = f.negative_dur_lines;
    d["lost_bytes"] = f.lost_bytes;
    d["lost_lines"] = f.lost_lines;
    d["unresolved_hashes"] = f.unresolved_hashes;
    d["warnings"] = f.warnings;
    fl.append(d);
  }
  return fl;
}

// Loads started in native threads before the caller needs them (the threaded summary starts its
// first batches right after planning, while Python still imports NumPy and the analysis modules:
// docs/perf/i27-start.md). Each item is load_batch's or load_files' work; the threads never take
// the GIL, and take(i) hands item i over exactly as load_batch / load_files return it (the same
// dict, or the same exception: the reader's exception is kept and rethrown through pybind11's
// translators). At most `threads` threads, each taking the next item in order; they end when
// every item is loaded, at the first take() (the caller is ready: it loads the items not started
// itself) or on close(). Results wait in C++ memory until taken.
class Prefetch {
 public:
  struct Item {
    bool files = false;
    std::string path, index_dir;
    int64_t first = 0, last = 0;
    std::vector<std::string> paths;
    ArgsProjection args;
  };

  Prefetch(std::vector<Item> items, size_t threads) : items_(std::move(items)), results_(items_.size()) {
    size_t n = std::min(std::max<size_t>(threads, 1), items_.size());
    threads_.reserve(n);
    try {
      for (size_t k = 0; k < n; ++k) threads_.emplace_back([this] { work(); });
    } catch (...) {  // (no thread left running with this object gone)
      close();
      throw;
    }
  }
  ~Prefetch() { close(); }

  size_t size() const { return items_.size(); }

  // Item i as load_batch / load_files returns it (waits, without the GIL, while it loads), or None
  // when no thread had started it: the caller loads it itself. The first take() is the hand-over:
  // the threads start no other item after it (they load while the caller is not ready yet).
  py::object take(size_t i) {
    if (i >= results_.size()) throw py::index_error("no such prefetched item");
    Result r;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(mu_);
      handed_over_ = true;
      if (i >= next_ && results_[i].state == State::Waiting && !closed_) {
        results_[i].state = State::Taken;  // (never started, and now never will be)
        return py::none();
      }
      cv_.wait(lock, [&] { return results_[i].state != State::Waiting || closed_; });
      if (results_[i].state != State::Done) throw std::logic_error("prefetched item taken twice or after close()");
      r = std::move(results_[i]);
      results_[i].state = State::Taken;
    }
    if (r.error) std::rethrow_exception(r.error);
    py::dict out = batch_dict(std::move(r.owner));
    if (items_[i].files) out["files"] = files_list(r.files);
    return std::move(out);
  }

  // Items loaded and not taken yet.
  size_t ready() {
    std::lock_guard<std::mutex> lock(mu_);
    return size_t(
        std::count_if(results_.begin(), results_.end(), [](const Result& r) { return r.state == State::Done; }));
  }

  // Per item (start, end) of its load on CLOCK_MONOTONIC in ns (Python's time.monotonic_ns()),
  // (0, 0) while not loaded.
  std::vector<std::pair<int64_t, int64_t>> times() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<int64_t, int64_t>> out;
    for (auto& r : results_) out.emplace_back(r.start_ns, r.end_ns);
    return out;
  }

  // Stops the threads (a load under way finishes first) and frees the results not taken.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : results_) {
      if (r.state == State::Done) r.state = State::Taken;  // (freed: take() refuses it)
      r.owner.reset();
      r.files.clear();
    }
  }

 private:
  enum class State { Waiting, Done, Taken };
  struct Result {
    State state = State::Waiting;
    std::unique_ptr<ColumnOwner> owner;
    std::vector<FileLoad> files;
    std::exception_ptr error;
    int64_t start_ns = 0, end_ns = 0;
  };

  static int64_t now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
  }

  void work() {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (closed_ || handed_over_ || next_ >= items_.size()) return;
        i = next_++;
      }
      Result r;
      r.start_ns = now_ns();
      try {
        r.owner = std::make_unique<ColumnOwner>();
        seed_codes(r.owner->batch.columns);
        const Item& it = items_[i];
        if (it.files) r.files = load_files_into(r.owner->batch, it.paths, it.args);
        else load_batch_into(r.owner->batch, it.path, it.first, it.last, it.index_dir, it.args);
        prepare(*r.owner);
      } catch (...) {  // (handed over by take(), as load_batch would have raised it)
        r.owner.reset();
        r.files.clear();
        r.error = std::current_exception();
      }
      r.end_ns = now_ns();
      r.state = State::Done;
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_[i] = std::move(r);
      }
      cv_.notify_all();
    }
  }

  std::vector<Item> items_;
  std::vector<Result> results_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t next_ = 0;
  bool closed_ = false, handed_over_ = false;
  std::vector<std::thread> threads_;
};

std::unique_ptr<Prefetch> make_prefetch(const py::list& items, size_t threads) {
  std::vector<Prefetch::Item> out;
  for (auto o : items) {
    auto t = o.cast<py::tuple>();
    Prefetch::Item it;
    std::string kind = t[0].cast<std::string>();
    if (kind == "batch" && t.size() == 6) {
      it.path = py::str(t[1]).cast<std::string>();
      it.first = t[2].cast<int64_t>();
      it.last = t[3].cast<int64_t>();
      it.index_dir = opt(t[4]);
      it.args = projection(t[5]);
    } else if (kind == "files" && t.size() == 3) {
      it.files = true;
      it.paths = t[1].cast<std::vector<std::string>>();
      it.args = projection(t[2]);
    } else {
      throw py::value_error("items are ('batch', path, first, last, index_dir, columns) or ('files', paths, columns)");
    }
    out.push_back(std::move(it));
  }
  return std::make_unique<Prefetch>(std::move(out), threads);
}

// The event name the preload records for an intercepted symbol: the _FORTIFY_SOURCE entry
// points (__read_chk, __open_2, ...) record the plain name (src/preload/posix.cpp, stdio.cpp).
std::string event_name_of(std::string_view sym) {
  bool fortify = sym.size() > 2 && sym.substr(0, 2) == "__" &&
                 ((sym.size() > 4 && sym.substr(sym.size() - 4) == "_chk") ||
                  (sym.size() > 2 && sym.substr(sym.size() - 2) == "_2"));
  if (!fortify) return std::string(sym);
  sym.remove_prefix(2);
  sym.remove_suffix(sym.substr(sym.size() - 2) == "_2" ? 2 : 4);
  return std::string(sym);
}

// src/format/calls.def as Python rows: the analyzer's call vocabulary is derived from it
// (dfanalyzer/engine/vocabulary.py), never restated.
py::list call_table() {
  py::list out;
#define DFT_CALL(interface, name, ret, params, bytes) \
  out.append(py::dict(py::arg("interface") = #interface, py::arg("symbol") = #name, \
                      py::arg("event") = event_name_of(#name), py::arg("ret") = #ret, py::arg("params") = #params, \
                      py::arg("bytes") = #bytes));
#include "../format/calls.def"
#undef DFT_CALL
  return out;
}

}  // namespace

PYBIND11_MODULE(_reader, m) {
  m.doc() = "DFTracer trace indexer, batch reader and parser (see docs/index.md)";
#if defined(DFTRACER_READER_NEEDS_AVX2) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("pclmul"))
    throw py::import_error("dfanalyzer._reader was built for x86-64-v3 (AVX2); rebuild with -DDFTRACER_READER_MARCH=");
#endif
  py::register_exception<ReaderError>(m, "ReaderError", PyExc_OSError);
  m.def(
      "build_index",
      [](const std::string& path, const py::object& index_dir, bool force, bool verify) {
        IndexInfo i;
        {
          py::gil_scoped_release nogil;
          i = build_index(path, opt(index_dir), force, verify);
        }
        return info_dict(i);
      },
      py::arg("path"), py::arg("index_dir") = py::none(), py::arg("force") = false, py::arg("verify") = false,
      "Build or load the index of a trace; returns its metadata and checkpoints. verify=True rebuilds it "
      "inflating every member and comparing its header with the data.");
  m.def(
      "scan",
      [](const std::string& path, const py::object& index_dir) {
        IndexInfo i;
        {
          py::gil_scoped_release nogil;
          i = scan_file(path, opt(index_dir));
        }
        return scan_dict(i);
      },
      py::arg("path"), py::arg("index_dir") = py::none(),
      "Index + one parse pass: events, metadata records, skipped lines, what reading could not deliver "
      "(cached in the index).");
  m.def(
      "read_lines_checked",
      [](const std::string& path, int64_t first_line, int64_t n_lines, const py::object& index_dir) {
        return lines_dict(checked_lines(path, first_line, n_lines, opt(index_dir)));
      },
      py::arg("path"), py::arg("first_line"), py::arg("n_lines"), py::arg("index_dir") = py::none(),
      "Lines [first_line, first_line + n_lines) (0-based) without their newline, and what could not be read: "
      "dict lines, lost_lines, lost_bytes, warnings, reindexed.");
  m.def(
      "read_lines",
      [](const std::string& path, int64_t first_line, int64_t n_lines, const py::object& index_dir) {
        // (the list taken out of the dict while it lives: an accessor of a temporary dangles)
        py::dict d = lines_dict(checked_lines(path, first_line, n_lines, opt(index_dir)));
        return py::list(d["lines"]);
      },
      py::arg("path"), py::arg("first_line"), py::arg("n_lines"), py::arg("index_dir") = py::none(),
      "Lines [first_line, first_line + n_lines) (0-based) without their newline.");
  m.def(
      "read_checkpoints",
      [](const std::string& path, int64_t first, int64_t last, const py::object& index_dir) {
        RangeData r;
        {
          py::gil_scoped_release nogil;
          r = read_checkpoints(*open_index(path, opt(index_dir), true), first, last);
        }
        return py::bytes(r.data.data(), r.data.size());
      },
      py::arg("path"), py::arg("first"), py::arg("last"), py::arg("index_dir") = py::none(),
      "Raw bytes of checkpoints [first, last] (inclusive).");
  m.def("load_batch", &load_batch_py, py::arg("path"), py::arg("first"), py::arg("last"),
        py::arg("index_dir") = py::none(), py::arg("columns") = py::none(), py::arg("extra") = false,
        "Parse checkpoints [first, last] into columns (NumPy views owned by the batch). columns: None = every "
        "args column (at most MAX_ARG_COLUMNS, the others in args_extra), else the names of the args columns to "
        "build (core columns are always built); extra: keys left out of columns go to args_extra, not dropped.");
  m.def(
      "checkpoint_stats",
      [](const std::string& path, const py::object& index_dir) {
        std::vector<CheckpointStats> st;
        {
          py::gil_scoped_release nogil;
          st = checkpoint_stats(*open_index(path, opt(index_dir), true));
        }
        py::list out;
        for (auto& c : st) {
          py::dict d;
          d["number"] = c.number;
          d["events"] = c.events;
          d["min_ts"] = c.min_ts;
          d["max_ts"] = c.max_ts;
          d["min_te"] = c.min_te;
          d["max_te"] = c.max_te;
          d["cats"] = c.cats_known ? py::object(py::cast(c.cats)) : py::object(py::none());
          d["names"] = c.names_known ? py::object(py::cast(c.names)) : py::object(py::none());
          out.append(d);
        }
        return out;
      },
      py::arg("path"), py::arg("index_dir") = py::none(),
      "Per-checkpoint event stats (events, min/max ts and te, category and name sets or None), "
      "kept in the index.");
  m.attr("MAX_ARG_COLUMNS") = kMaxArgColumns;
  m.attr("MAX_TS") = kMaxTs;
  m.def("load_files", &load_files_py, py::arg("paths"), py::arg("columns") = py::none(), py::arg("extra") = false,
        "Index in memory, read and parse many small files into one batch; 'files' has per-file rows and counts. "
        "columns: as in load_batch.");
  py::class_<Prefetch>(
      m, "Prefetch",
      "Loads started in native threads (no GIL, no NumPy) and taken later: Prefetch(items, threads); items "
      "are ('batch', path, first, last, index_dir, columns) or ('files', paths, columns); take(i) "
      "returns item i as load_batch / load_files would (or raises what they would raise), once, or None "
      "when no thread had started it (the threads start no item after the first take()); "
      "ready(): items loaded and not taken; times(): per item (start, end) in time.monotonic_ns(); "
      "close(): stops the threads and frees what was not taken.")
      .def(py::init(&make_prefetch), py::arg("items"), py::arg("threads") = 1)
      .def("take", &Prefetch::take, py::arg("i"))
      .def("ready", &Prefetch::ready)
      .def("times", &Prefetch::times)
      .def("close", &Prefetch::close, py::call_guard<py::gil_scoped_release>())
      .def("__len__", &Prefetch::size);
  m.def(
      "index_path",
      [](const std::string& path, const py::object& index_dir) { return index_path_for(path, opt(index_dir)); },
      py::arg("path"), py::arg("index_dir") = py::none());
  m.attr("INDEX_FORMAT_VERSION") = kIndexFormatVersion;
  m.def("call_table", &call_table,
        "The intercepted calls of src/format/calls.def, in order: dicts interface (POSIX, STDIO, PROCESS, HDF5), "
        "symbol, event (the name the preload records), ret, params (C types), bytes (RET, RET_TIMES_SIZE, RET_COPY, "
        "ARG_SIZE, NONE, NO_EVENT).");
  m.def(
      "byte_rule", [](const std::string& name) { return int(size_kind_of(name)); }, py::arg("name"),
      "The reader's byte rule for an event name: 0 none, 1 args.ret, 2 args.ret * args.size, 3 args.size (calls.def plus "
      "the names other tracers record).");
  m.attr("TRACER_CATEGORY") = std::string(dftracer::format::kTracerCategory);
  // glibc's defaults give the threaded summary's freed memory back to the system and fault it
  // in again in the next batch: its mmap threshold adapts to the largest block freed so far
  // (~0.6 MiB here) and the top of a thread's arena is trimmed past twice that, so each batch
  // re-faults ~600 pages and grows its arena again (mprotect); docs/perf/i28-mm.md.
  m.def(
      "keep_freed_memory",
      [](int64_t trim_bytes, int64_t mmap_bytes) {
        if (trim_bytes < 0 || trim_bytes > INT32_MAX) throw py::value_error("trim_bytes: 0 to 2**31 - 1");
        if (mmap_bytes < 0 || mmap_bytes > (int64_t(32) << 20)) throw py::value_error("mmap_bytes: 0 to 32 MiB");
#if defined(__GLIBC__)
        return mallopt(M_MMAP_THRESHOLD, int(mmap_bytes)) == 1 && mallopt(M_TRIM_THRESHOLD, int(trim_bytes)) == 1;
#else
        return false;
#endif
      },
      py::arg("trim_bytes"), py::arg("mmap_bytes"),
      "For a process that is only the dfanalyzer command (cli.run), never a user's: glibc malloc serves blocks below "
      "mmap_bytes (bytes, at most 32 MiB, glibc's largest; a fixed threshold instead of glibc's adaptive one) from its "
      "arenas and keeps up to trim_bytes (bytes) of freed memory at the top of each arena instead of giving it back, "
      "so that a batch reuses the pages the previous one freed. Process-wide, for the rest of the process; not "
      "inherited by child processes. Returns True when set, False where malloc is not glibc's. ValueError: "
      "trim_bytes outside 0 to 2**31 - 1, mmap_bytes outside 0 to 32 MiB.");
}
