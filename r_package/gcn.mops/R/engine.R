# Finding and calling the Python engine (gcnmops) through reticulate, and the bridge registry.
#
# Which Python: the first of
#   1. options(gcn.mops.python = "/path/to/python")
#   2. the environment variable GCNMOPS_PYTHON
#   3. the environment variable RETICULATE_PYTHON (reticulate's own setting)
#   4. the .venv/bin/python of the gcnmops repository this package was installed from (recorded at
#      install time by ./configure; scripts/setup.sh creates that .venv), or of GCNMOPS_REPO
#   5. reticulate's default Python.
# The Python needs the gcnmops package (or the repository's sources, which are put on sys.path when
# the package is not installed there), numpy < 2 (reticulate 1.28) and rpy2 3.5.x.
# Python is started once per R session: after the first call the choice is fixed.

.state <- new.env(parent = emptyenv())   # engine module, last run's report
.bridge <- new.env(parent = emptyenv())  # key -> bridge environment (Python finds it there, via rpy2)

.repo_root <- function() {
  env <- Sys.getenv("GCNMOPS_REPO", "")
  if (nzchar(env)) return(normalizePath(env, mustWork = FALSE))
  f <- system.file("gcnmops_repo", package = "gcn.mops")
  if (nzchar(f)) {
    root <- readLines(f, n = 1L, warn = FALSE)
    if (length(root) == 1L && dir.exists(root)) return(root)
  }
  NULL
}

.python_path <- function() {
  opt <- getOption("gcn.mops.python", "")
  if (is.character(opt) && nzchar(opt)) return(opt)
  env <- Sys.getenv("GCNMOPS_PYTHON", "")
  if (nzchar(env)) return(env)
  if (nzchar(Sys.getenv("RETICULATE_PYTHON", ""))) return(NULL)
  root <- .repo_root()
  if (!is.null(root)) {
    venv <- file.path(root, ".venv", "bin", "python")
    if (file.exists(venv)) return(venv)
  }
  NULL
}

# The engine's R-facing Python module (gcnmops.rbridge), imported once.
.engine <- function() {
  if (!is.null(.state$mod)) return(.state$mod)
  py <- .python_path()
  if (!reticulate::py_available(initialize = FALSE) && !is.null(py)) {
    if (!file.exists(py)) stop(sprintf("The Python set for gcn.mops (%s) does not exist.", py), call. = FALSE)
    reticulate::use_python(py, required = TRUE)
  }
  mod <- tryCatch(reticulate::import("gcnmops.rbridge"), error = function(e) e)
  if (inherits(mod, "error")) {
    root <- .repo_root()
    if (!is.null(root) && file.exists(file.path(root, "gcnmops", "__init__.py"))) {
      sys <- reticulate::import("sys")
      if (!(root %in% sys$path)) sys$path$insert(0L, root)
      mod <- tryCatch(reticulate::import("gcnmops.rbridge"), error = function(e) e)
    }
  }
  if (inherits(mod, "error"))
    stop(paste0("gcn.mops cannot load its Python engine (the gcnmops package) in ",
                reticulate::py_config()$python, ": ", conditionMessage(mod),
                "\nSet options(gcn.mops.python = \"/path/to/python\") or the environment variable ",
                "GCNMOPS_PYTHON to a Python with gcnmops, numpy < 2 and rpy2 3.5 (scripts/setup.sh makes ",
                "one: .venv/bin/python), in a fresh R session."), call. = FALSE)
  .state$mod <- mod
  mod
}

#' Information on the Python engine (exported).
gcnmopsEngine <- function() {
  mod <- .engine()
  cfg <- reticulate::py_config()
  gc <- reticulate::import("gcnmops")
  model <- reticulate::import("gcnmops.model")
  list(python = cfg$python, numpy = cfg$numpy[[2]] %||% NA, gcnmops = gc$`__version__`,
       gpu = isTRUE(model$gpu_usable()), repo = .repo_root())
}

`%||%` <- function(a, b) if (is.null(a)) b else a

.bridge_register <- function(env) {
  key <- paste0("k", as.hexmode(sample.int(.Machine$integer.max, 1L)), "_", length(ls(.bridge)))
  assign(key, env, envir = .bridge)
  key
}

.bridge_unregister <- function(key) {
  if (exists(key, envir = .bridge, inherits = FALSE)) rm(list = key, envir = .bridge)
}

# Call the engine function `fun` of gcnmops.rbridge on the bridge environment `env`; Python's
# warnings become R warnings, its log lines messages, its input errors R errors (no traceback).
.call_engine <- function(fun, env, ...) {
  mod <- .engine()
  key <- .bridge_register(env)
  on.exit(.bridge_unregister(key), add = TRUE)
  res <- mod[[fun]](key, ...)
  if (!is.null(res$error)) stop(res$error, call. = FALSE)
  for (m in unlist(res$messages)) message(m)
  for (w in unlist(res$warnings)) warning(w, call. = FALSE)
  res
}

# Hex address of the data of an R vector, as the engine sees it (for the zero-copy tests).
.address <- function(x) {
  env <- new.env(parent = emptyenv())
  env$x <- x
  key <- .bridge_register(env)
  on.exit(.bridge_unregister(key), add = TRUE)
  .engine()$address_in_env(key, "x")
}
