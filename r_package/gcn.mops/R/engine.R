# Finding and calling the Python engine (gcnmops).
#
# Which Python: the first of
#   1. options(gcn.mops.python = "/path/to/python")
#   2. the environment variable GCNMOPS_PYTHON
#   3. the environment variable RETICULATE_PYTHON (reticulate's own setting)
#   4. the .venv/bin/python of the gcnmops repository this package was installed from (recorded at
#      install time by ./configure; scripts/setup.sh creates that .venv), or of GCNMOPS_REPO
#   5. reticulate's default Python.
# The Python needs the gcnmops package (or the repository's sources, which are put on sys.path when
# gcnmops is not installed there), numpy < 2 (Debian's reticulate 1.28) and rpy2 3.5.x.
# Python is started once per R session: after the first call the choice is fixed.
#
# How R talks to the engine: reticulate only starts Python and runs one statement that imports
# gcnmops.rbridge, which attaches rpy2 to this R process and registers an R function (an rpy2 callback,
# .state$host_hook) through which every later call goes. Data never crosses reticulate: R puts it in a
# bridge environment (registered in .bridge under a key) and the engine reads and writes it in place
# through rpy2. (reticulate 1.28 finalizes its Python objects without taking Python's lock, which rpy2
# releases while R runs; so no reticulate object is made after start-up, and reticulate garbage is
# collected before each call: see .collect_python_garbage().) When R itself runs inside Python through rpy2, reticulate is not used at all: Python calls
# gcnmops.rbridge.attach(), which registers the same callback.

.state <- new.env(parent = emptyenv())   # host_hook (engine callback), last_run report
.bridge <- new.env(parent = emptyenv())  # key -> bridge environment (the engine finds it there)

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
  if (is.character(opt) && length(opt) == 1L && nzchar(opt)) return(opt)
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

# TRUE when this R runs inside a Python process that started it through rpy2 (rpy2 starts R with
# "rpy2" as its program name, and may say so in PYTHON_SESSION_INITIALIZED).
.python_host <- function() {
  if (identical(commandArgs()[1L], "rpy2")) return(TRUE)
  info <- Sys.getenv("PYTHON_SESSION_INITIALIZED", "")
  nzchar(info) && grepl(sprintf("current_pid=%d(:|$)", Sys.getpid()), info)
}

.engine_error <- function(msg) {
  stop(paste0("gcn.mops cannot load its Python engine (the Python package gcnmops): ", msg,
              "\nSet options(gcn.mops.python = \"/path/to/python\") or the environment variable GCNMOPS_PYTHON ",
              "to a Python with gcnmops, numpy < 2 and rpy2 3.5 (scripts/setup.sh of the gcnmops repository ",
              "makes one: .venv/bin/python), in a fresh R session."), call. = FALSE)
}

# The engine callback (an R function calling gcnmops.rbridge), set up once.
.engine <- function() {
  if (!is.null(.state$host_hook)) return(.state$host_hook)
  if (.python_host())
    stop(paste("gcn.mops runs inside a Python process (rpy2): call gcnmops.rbridge.attach() in Python",
               "before using gcn.mops from R there."), call. = FALSE)
  if (!requireNamespace("reticulate", quietly = TRUE)) .engine_error("the R package reticulate is not installed.")
  py <- .python_path()
  if (!reticulate::py_available(initialize = FALSE) && !is.null(py)) {
    if (!file.exists(py)) .engine_error(sprintf("the Python set for gcn.mops (%s) does not exist.", py))
    # RETICULATE_PYTHON is what reticulate honours first (before project files in the working
    # directory); restored once Python runs (the choice is then fixed for the session)
    old <- Sys.getenv("RETICULATE_PYTHON", NA)
    Sys.setenv(RETICULATE_PYTHON = py)
    on.exit(if (is.na(old)) Sys.unsetenv("RETICULATE_PYTHON") else Sys.setenv(RETICULATE_PYTHON = old),
            add = TRUE)
  }
  # tell rpy2 (imported by the engine) that this R process was not started by rpy2
  if (!nzchar(Sys.getenv("R_SESSION_INITIALIZED", "")))
    Sys.setenv(R_SESSION_INITIALIZED = sprintf("PID=%d:NAME=\"R\"", Sys.getpid()))
  cfg <- tryCatch(reticulate::py_config(), error = function(e) e)
  if (inherits(cfg, "error")) .engine_error(conditionMessage(cfg))
  root <- .repo_root()
  code <- paste(
    "import sys",
    "try:",
    "    import gcnmops.rbridge as _gcnmops_rbridge",
    "except ImportError:",
    sprintf("    if %s and %s not in sys.path: sys.path.insert(0, %s)",
            if (is.null(root)) "False" else "True", deparse(root %||% ""), deparse(root %||% "")),
    "    import gcnmops.rbridge as _gcnmops_rbridge",
    "_gcnmops_rbridge.attach(force=True)",
    sep = "\n")
  invisible(gc())
  res <- tryCatch(reticulate::py_run_string(code, convert = FALSE), error = function(e) e)
  failed <- inherits(res, "error")
  msg <- if (failed) conditionMessage(res) else ""
  rm(res)
  invisible(gc())
  if (failed) .engine_error(sprintf("in %s: %s", cfg$python, msg))
  if (is.null(.state$host_hook)) .engine_error("gcnmops.rbridge.attach() did not register its callback.")
  .state$reticulate <- TRUE
  .state$host_hook
}

# Information on the Python engine: python, numpy, gcnmops versions, GPU usability, repository.
gcnmopsEngine <- function() {
  env <- new.env(parent = emptyenv())
  res <- .call_engine("engine_info", env)
  res[c("error", "messages", "warnings")] <- NULL
  c(res, list(repo = .repo_root()))
}

`%||%` <- function(a, b) if (is.null(a)) b else a

.bridge_register <- function(env) {
  repeat {
    key <- paste0("k", paste(sample(c(0:9, letters[1:6]), 12L, replace = TRUE), collapse = ""))
    if (!exists(key, envir = .bridge, inherits = FALSE)) break
  }
  assign(key, env, envir = .bridge)
  key
}

.bridge_unregister <- function(key) {
  if (exists(key, envir = .bridge, inherits = FALSE)) rm(list = key, envir = .bridge)
}

# Call the engine function `fun` of gcnmops.rbridge on the bridge environment `env`; Python's
# warnings become R warnings, its log lines messages, its input errors R errors (no traceback).
.call_engine <- function(fun, env, ...) {
  hook <- .engine()
  key <- .bridge_register(env)
  on.exit(.bridge_unregister(key), add = TRUE)
  .collect_python_garbage()
  res <- hook(fun, key, ...)
  if (!is.null(res$error)) stop(res$error, call. = FALSE)
  for (m in unlist(res$messages)) message(m)
  for (w in unlist(res$warnings)) warning(w, call. = FALSE)
  res
}

# reticulate 1.28 releases a Python object from its R finalizer without taking Python's lock; the engine
# runs R code through rpy2 with that lock released, and any garbage collection there may finalize such
# objects: so they are collected here first, in R, where it is safe. gcn.mops itself makes no reticulate
# objects after start-up; a young-generation collection (~5 ms) catches recent ones of the user, a full one
# (~0.5 s with Bioconductor loaded) is made when reticulate is attached or a loaded package imports it, or
# when options(gcn.mops.gcBeforeEngine = TRUE) asks for it (FALSE: none).
.collect_python_garbage <- function() {
  if (!isTRUE(.state$reticulate)) return(invisible())
  opt <- getOption("gcn.mops.gcBeforeEngine", NA)
  if (identical(opt, FALSE)) return(invisible())
  full <- isTRUE(opt) || "package:reticulate" %in% search() ||
    any(vapply(setdiff(loadedNamespaces(), c("gcn.mops", "reticulate")),
               function(ns) "reticulate" %in% names(getNamespaceImports(ns)), TRUE))
  invisible(gc(full = full))
}

# Hex address of the data of an R vector, as the engine sees it (for the zero-copy tests).
.address <- function(x) {
  env <- new.env(parent = emptyenv())
  env$x <- x
  .call_engine("address_in_env", env, "x")$address
}
