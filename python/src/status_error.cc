// Copyright (c) cqlstream authors.
#include "status_error.h"

#include <nanobind/stl/string.h>

#include <string>

namespace nb = nanobind;

namespace cqlstream::python {
namespace {

void TranslateStatus(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const StatusError& e) {
    const std::string code(Status::CodeName(e.status().code()));
    try {
      nb::object exc = nb::module_::import_("cqlstream.errors").attr("from_status")(code, e.status().message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    } catch (const nb::python_error&) {
      PyErr_SetString(PyExc_RuntimeError, e.status().ToString().c_str());
    }
  }
}

}  // namespace

void RegisterStatusTranslator() { nb::register_exception_translator(TranslateStatus); }

}  // namespace cqlstream::python
