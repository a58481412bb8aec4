.onLoad <- function(libname, pkgname) {
  # reticulate must not pick a Python before gcn.mops has chosen one (see .python_path()).
  invisible(NULL)
}
