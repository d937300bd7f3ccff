// dftracer.dftracer: the native module that PyPI pydftracer's Python layer calls, implemented on
// our core (docs/python_api.md "pydftracer beside dftracer").
//
// pydftracer 2.0.x (dftracer/python/logger.py) does `import dftracer.dftracer as profiler` when
// DFTRACER_ENABLE=1 and falls back to a silent no-op when that import fails; pydftracer 1.0.x
// (dftracer/logger.py) imports a native `pydftracer` module with the same functions. Both call:
//   initialize(log_file=None, data_dirs=None, process_id=-1)
//   get_time() -> int µs;  get_config(key) -> str;  enter_event();  exit_event()
//   log_event(name, cat, start_time, duration, int_args, string_args, float_args[, relations])
//   log_metadata_event(key, value);  finalize()
// and 2.0.x also mark_used(name), set_app_metadata_int/string(key, value).
// log_event's args are dicts key -> (tag_type, value) with tag_type 0 KEY, 1 VALUE, 2 IGNORE
// (2.0.x), or key -> value (1.0.x passes string_args of plain str). Tag types only steer the
// upstream aggregation mode; here every tag is written into "args" (the core's aggregation,
// aggregation.h, folds numeric args and drops strings whatever their type).
//
// initialize() and finalize() go through dftracer._api (the path of our own
// dftracer.python.dftracer.initialize_log/finalize), so a pydftracer program gets the same output
// file, data dirs, process_id record and process-lifecycle hooks as our Python API.
#include <pybind11/pybind11.h>

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "py_args.h"
#include "py_strings.h"
#include "tracer.h"

namespace py = pybind11;
using dftracer::ArgList;
using dftracer::Tracer;
using dftracer::py_strings::as_view;

namespace {

thread_local int t_event_depth = 0;  // enter_event() - exit_event() on this thread

enum class Source { INT, STRING, FLOAT };  // which *_args dict a tag came from

struct Tag {
  std::string_view key;
  PyObject* value;  // borrowed from the caller's dict/tuple, alive for the call
  Source source;
};

// Collect the tags of one args dict into *tags; a key seen before is replaced (the upstream
// binding inserts int, then string, then float args into one map, later ones winning).
void collect(py::handle dict, Source kind, const char* what, std::vector<Tag>* tags, std::vector<py::object>* keep) {
  if (!dict || dict.is_none()) return;
  if (!PyDict_Check(dict.ptr())) {
    throw py::type_error(std::string("log_event: ") + what + " must be a dict of key -> (tag_type, value), got " +
                         std::string(py::str(py::type::of(dict).attr("__name__"))));
  }
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict.ptr(), &pos, &k, &v)) {
    PyObject* value = v;
    if (PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 2) {
      // (tag_type, value): tag_type 0 KEY, 1 VALUE, 2 IGNORE; other numbers count as KEY, as
      // upstream's convert(). The type does not change what we write.
      value = PyTuple_GET_ITEM(v, 1);
    }
    std::string_view key = as_view(k, keep);
    bool replaced = false;
    for (Tag& t : *tags) {
      if (t.key == key) {
        t.value = value;
        t.source = kind;
        replaced = true;
        break;
      }
    }
    if (!replaced) tags->push_back(Tag{key, value, kind});
  }
}

// One tag as a value: int args as integers, float args as doubles, string args as strings; a
// value of another Python type is written by its own type (bool, int, float, else str()).
dftracer::py_args::Value tag_value(const Tag& t, std::vector<py::object>* keep) {
  using dftracer::py_args::Kind;
  dftracer::py_args::Value x;
  PyObject* v = t.value;
  if (t.source == Source::STRING || PyUnicode_Check(v)) {
    x.s = as_view(v, keep);
  } else if (PyBool_Check(v)) {
    x.kind = Kind::Bool;
    x.b = v == Py_True;
  } else if (t.source == Source::FLOAT && (PyFloat_Check(v) || PyLong_Check(v))) {
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      x.s = as_view(v, keep);
    } else {
      x.kind = Kind::Double;
      x.d = d;
    }
  } else if (PyLong_Check(v)) {
    int overflow = 0;
    long long i = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow == 0) {
      x.kind = Kind::Int;
      x.i = i;
    } else {
      unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(v) : 0;
      if (overflow < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        x.s = as_view(v, keep);
      } else {
        x.kind = Kind::Uint;
        x.u = u;
      }
    }
  } else if (PyFloat_Check(v)) {
    x.kind = Kind::Double;
    x.d = PyFloat_AS_DOUBLE(v);
  } else {
    x.s = as_view(v, keep);
  }
  return x;
}

// DFTRACER_* configuration value as the upstream get_config returns it (a string; "" unknown).
std::string config_value(const std::string& key) {
  const dftracer::Config& c = dftracer::config();
  auto b = [](bool x) { return std::string(x ? "1" : "0"); };
  if (key == "DFTRACER_ENABLE") return b(c.enable);
  if (key == "DFTRACER_INIT") return c.init == dftracer::InitMode::PRELOAD ? "PRELOAD" : "FUNCTION";
  if (key == "DFTRACER_LOG_FILE") return c.log_file;
  if (key == "DFTRACER_DATA_DIR") return c.trace_all ? std::string("all") : c.data_dirs_raw;
  if (key == "DFTRACER_INC_METADATA") return b(c.inc_metadata);
  if (key == "DFTRACER_TRACE_COMPRESSION") return b(c.compression);
  if (key == "DFTRACER_COMPRESSION_LEVEL") return std::to_string(c.compression_level);
  if (key == "DFTRACER_WRITE_BUFFER_SIZE") return std::to_string(c.write_buffer_size);
  if (key == "DFTRACER_DISABLE_IO") return b(c.disable_io);
  if (key == "DFTRACER_DISABLE_POSIX") return b(c.disable_posix);
  if (key == "DFTRACER_DISABLE_STDIO") return b(c.disable_stdio);
  if (key == "DFTRACER_BIND_SIGNALS") return b(c.bind_signals);
  if (key == "DFTRACER_SET_CORE_AFFINITY") return b(c.set_core_affinity);
  if (key == "DFTRACER_CONFIGURATION") return c.config_file;
  if (key == "DFTRACER_LOG_LEVEL") {
    static const char* kLevels[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    return kLevels[static_cast<int>(c.log_level)];
  }
  // Our timestamps and durations are always µs (pydftracer's get_time_scale() reads this key).
  if (key == "DFTRACER_TIME_METRIC") return "US";
  return std::string();
}

// dftracer._api, or None when it cannot be imported (then the core is driven directly).
py::object python_api() {
  try {
    return py::module_::import("dftracer._api");
  } catch (py::error_already_set&) {
    PyErr_Clear();
    return py::none();
  }
}

}  // namespace

PYBIND11_MODULE(dftracer, m) {
  m.doc() =
      "dftracer core driven through the native interface PyPI pydftracer calls (dftracer.dftracer); "
      "see docs/python_api.md";

  m.def(
      "initialize",
      [](py::object log_file, py::object data_dirs, py::object process_id) {
        py::object api = python_api();
        if (!api.is_none()) {
          // Our API's initialize_log: same file naming, makedirs, process_id and lifecycle hooks.
          api.attr("dftracer")
              .attr("initialize_log")(py::arg("logfile") = log_file, py::arg("data_dir") = data_dirs,
                                      py::arg("process_id") = process_id);
          return;
        }
        std::string lf, dd;
        if (!log_file.is_none()) lf = py::str(log_file);
        if (!data_dirs.is_none()) dd = py::str(data_dirs);
        int pid = process_id.is_none() ? -1 : py::cast<int>(process_id);
        py::gil_scoped_release release;
        Tracer::instance()->initialize(log_file.is_none() ? nullptr : lf.c_str(),
                                       data_dirs.is_none() ? nullptr : dd.c_str(), pid < 0 ? nullptr : &pid);
      },
      py::arg("log_file") = py::none(), py::arg("data_dirs") = py::none(), py::arg("process_id") = -1,
      "Start tracing (when DFTRACER_ENABLE is set): log_file is the trace name (None: DFTRACER_LOG_FILE), "
      "data_dirs ':'-separated traced prefixes (None: DFTRACER_DATA_DIR), process_id < 0 means none.");

  m.def(
      "get_time", []() { return dftracer::now_us(); }, "Wall-clock time in µs since the epoch.");

  m.def(
      "get_config", [](const std::string& key) { return config_value(key); }, py::arg("key"),
      "Value of a DFTRACER_* setting as a string ('' for keys the core does not know); "
      "DFTRACER_TIME_METRIC is 'US'.");

  m.def(
      "enter_event", []() { ++t_event_depth; }, "Note entry into a nested event on this thread.");
  m.def(
      "exit_event",
      []() {
        if (t_event_depth > 0) --t_event_depth;
      },
      "Note exit from a nested event.");
  m.def(
      "event_depth", []() { return t_event_depth; }, "enter_event() calls not yet matched by exit_event().");

  m.def(
      "log_event",
      [](py::handle name, py::handle cat, int64_t start_time, int64_t duration, py::handle int_args,
         py::handle string_args, py::handle float_args, py::handle /*relations*/) {
        Tracer* t = Tracer::instance();
        if (!t->active()) return;
        std::vector<py::object> keep;
        std::vector<Tag> tags;
        collect(int_args, Source::INT, "int_args", &tags, &keep);
        collect(string_args, Source::STRING, "string_args", &tags, &keep);
        collect(float_args, Source::FLOAT, "float_args", &tags, &keep);
        std::string_view n = as_view(name.ptr(), &keep);
        std::string_view c = as_view(cat.ptr(), &keep);
        if (tags.empty()) {
          t->log_complete(n, c, start_time, duration, nullptr);
          return;
        }
        ArgList args;  // every tag up to the byte limit, as the Python API (py_args.h)
        dftracer::py_args::Builder b(&args);
        for (const Tag& tag : tags) b.add(tag.key, tag_value(tag, &keep));
        b.finish();
        t->log_complete(n, c, start_time, duration, &args);
      },
      py::arg("name"), py::arg("cat"), py::arg("start_time"), py::arg("duration"), py::arg("int_args") = py::none(),
      py::arg("string_args") = py::none(), py::arg("float_args") = py::none(), py::arg("relations") = py::none(),
      "Complete event (\"ph\":\"X\"): start_time and duration in µs; each *_args dict maps key -> (tag_type, "
      "value) or key -> value; a key in several dicts keeps the last (int, string, float order). relations "
      "(entity provenance) is accepted and not recorded. TypeError if an args object is not a dict.");

  m.def(
      "log_metadata_event",
      [](py::handle key, py::handle value) {
        Tracer* t = Tracer::instance();
        if (!t->active()) return;
        std::vector<py::object> keep;
        t->log_metadata(as_view(key.ptr(), &keep), as_view(value.ptr(), &keep));
      },
      py::arg("key"), py::arg("value"), "Metadata record (\"ph\":\"M\", args {name: key, value: value}).");

  // 2.0.x extras: pydftracer's initialize_log calls mark_used() without checking that it exists.
  m.def(
      "mark_used",
      [](py::handle name) {
        static std::unordered_set<std::string>* seen = new std::unordered_set<std::string>();
        Tracer* t = Tracer::instance();
        if (!t->active()) return;
        std::vector<py::object> keep;
        std::string_view n = as_view(name.ptr(), &keep);
        if (seen->insert(std::string(n)).second) t->log_metadata("used", n);
      },
      py::arg("name"), "Record once per process that an integration was used (metadata record \"used\").");
  auto app_metadata = [](py::handle key, py::handle value) {
    Tracer* t = Tracer::instance();
    if (!t->active()) return;
    std::vector<py::object> keep;
    t->log_metadata(as_view(key.ptr(), &keep), as_view(value.ptr(), &keep));
  };
  m.def("set_app_metadata_int", app_metadata, py::arg("key"), py::arg("value"),
        "Process metadata record key = str(value).");
  m.def("set_app_metadata_string", app_metadata, py::arg("key"), py::arg("value"),
        "Process metadata record key = value.");

  m.def(
      "finalize",
      []() {
        py::object api = python_api();
        if (!api.is_none()) {
          api.attr("_finalize_core")();  // the core holds the flush signals back meanwhile
          return;
        }
        py::gil_scoped_release release;
        Tracer::instance()->finalize();
      },
      "Flush and close this process's trace (idempotent).");
}
