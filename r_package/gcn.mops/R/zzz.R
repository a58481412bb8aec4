.onLoad <- function(libname, pkgname) {
  # reticulate must not pick a Python before gcn.mops has chosen one (see .find_python()).
  # The thesis's gpu.time.* / cpu.time.* (thesis.R): active bindings, made before the exports are processed.
  .bind_thesis_timings(asNamespace(pkgname))
  invisible(NULL)
}

# With cn.mops installed, cn.mops's own names (cn.mops(), exomecn.mops(), ...) stay cn.mops's: gcn.mops's
# CPU versions are not attached (gcn.mops::cn.mops() reaches them), so an attached cn.mops is not masked.
.onAttach <- function(libname, pkgname) {
  if (nzchar(system.file(package = "cn.mops")) || "package:cn.mops" %in% search()) {
    env <- as.environment(paste0("package:", pkgname))
    rm(list = intersect(.cnmops_names, ls(env)), envir = env)
  }
  invisible(NULL)
}
