// Python str -> UTF-8 view helper shared by the two Python bindings of the core
// (pybind.cpp: dftracer._dftracer; upstream_module.cpp: dftracer.dftracer).
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>
#include <vector>

namespace dftracer::py_strings {

// UTF-8 view of a str (cached in the object by CPython, no copy); non-str objects are str()-ed
// into *keep, which owns every temporary until the caller is done with the view. Lone
// surrogates are replaced (U+FFFD); an object whose str() raises becomes "<unprintable>".
inline std::string_view as_view(PyObject* o, std::vector<pybind11::object>* keep) {
  if (!PyUnicode_Check(o)) {
    PyObject* s = PyObject_Str(o);
    if (!s) {
      PyErr_Clear();
      return std::string_view("<unprintable>");
    }
    keep->emplace_back(pybind11::reinterpret_steal<pybind11::object>(s));
    o = s;
  }
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(o, &n);
  if (!p) {  // lone surrogates: encode with replacement
    PyErr_Clear();
    PyObject* b = PyUnicode_AsEncodedString(o, "utf-8", "replace");
    if (!b) {
      PyErr_Clear();
      return std::string_view();
    }
    keep->emplace_back(pybind11::reinterpret_steal<pybind11::object>(b));
    return std::string_view(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
  }
  return std::string_view(p, static_cast<size_t>(n));
}

}  // namespace dftracer::py_strings
