# Finding and calling the Python engine (gcnmops).
#
# Which Python (see ?gcnmopsEngine): an explicit choice, if any, is used as it is:
#   1. options(gcn.mops.python = "/path/to/python")
#   2. the environment variable GCNMOPS_PYTHON
#   3. the environment variable RETICULATE_PYTHON (reticulate's own setting)
# otherwise the first of these that has the engine (gcnmops, numpy < 2, rpy2):
#   4. the .venv/bin/python of the gcnmops repository this package was installed from (recorded at
#      install time by ./configure), or of GCNMOPS_REPO (its sources are put on sys.path when gcnmops is
#      not installed in that Python)
#   5. reticulate's virtual environment "gcnmops" (file.path(reticulate::virtualenv_root(), "gcnmops"):
#      scripts/setup.sh links the repository's .venv there; installEngine() creates one)
#   6. python3 / python on the PATH.
# Each candidate is probed in a separate process before Python is started in this session, so that no
# work starts without an engine and a failed search can be followed, in the same session, by setting
# the option (Python, once started, is fixed for the session). numpy < 2: Debian's reticulate 1.28.
#
# How R talks to the engine: reticulate only starts Python and runs one statement that imports
# gcnmops.rbridge, which attaches rpy2 to this R process and registers an R function (an rpy2 callback,
# .state$host_hook) through which every later call goes. Data never crosses reticulate: R puts it in a
# bridge environment (registered in .bridge under a key) and the engine reads and writes it in place
# through rpy2. (reticulate 1.28 finalizes its Python objects without taking Python's lock, which rpy2
# releases while R runs; so no reticulate object is made after start-up, and reticulate garbage is
# collected before each call: see .collect_python_garbage().) When R itself runs inside Python through rpy2, reticulate is not used at all: Python calls
# gcnmops.rbridge.attach(), which registers the same callback.
#
# R's random numbers: gcn.mops draws none in its own code and restores .Random.seed after every engine
# call (the DNAcopy path seeds its jitter from R's stream without advancing it: .rng_seed()).

.state <- new.env(parent = emptyenv())   # host_hook (engine callback), last_run report, key counter
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

# The explicit choice (option, GCNMOPS_PYTHON, RETICULATE_PYTHON) as list(python, source), or NULL.
.python_choice <- function() {
  opt <- getOption("gcn.mops.python", "")
  if (is.character(opt) && length(opt) == 1L && nzchar(opt))
    return(list(python = path.expand(opt), source = "options(gcn.mops.python)"))
  for (var in c("GCNMOPS_PYTHON", "RETICULATE_PYTHON")) {
    v <- Sys.getenv(var, "")
    if (nzchar(v)) return(list(python = path.expand(v), source = paste("the environment variable", var)))
  }
  NULL
}

.venv_python <- function(dir) file.path(dir, if (.Platform$OS.type == "windows") "Scripts/python.exe" else "bin/python")

# Candidate Pythons when none is chosen explicitly, in order (paths that exist).
.python_candidates <- function() {
  out <- character()
  root <- .repo_root()
  if (!is.null(root)) out <- c(out, .venv_python(file.path(root, ".venv")))
  vroot <- tryCatch(reticulate::virtualenv_root(), error = function(e) path.expand("~/.virtualenvs"))
  out <- c(out, .venv_python(file.path(path.expand(vroot), c("gcnmops", "r-gcnmops"))))
  out <- c(out, unname(Sys.which(c("python3", "python"))))
  out <- unique(out[nzchar(out) & file.exists(out)])
  out
}

# "" when `python` has what the engine needs (probed in a separate process), else what is missing.
.probe_python <- function(python) {
  if (!file.exists(python)) return(sprintf("%s does not exist", python))
  root <- .repo_root()
  code <- paste0(
    "import sys, importlib.util as u\n",
    if (!is.null(root)) sprintf("sys.path.append(%s)\n", deparse(root)) else "",
    "miss = [m for m in ('gcnmops', 'numpy', 'rpy2') if u.find_spec(m) is None]\n",
    "v = '' if miss else __import__('numpy').__version__\n",
    "sys.stdout.write('no module ' + ', '.join(miss) if miss else ",
    "'numpy ' + v + ' (reticulate 1.28 needs numpy < 2)' if int(v.split('.')[0]) >= 2 else '')\n")
  out <- tryCatch(suppressWarnings(system2(python, c("-c", shQuote(code)), stdout = TRUE, stderr = TRUE)),
                  error = function(e) structure(conditionMessage(e), status = 1L))
  status <- attr(out, "status")
  if (!is.null(status) && status != 0L) return(paste(c("it does not run:", utils::tail(out, 2L)), collapse = " "))
  paste(out, collapse = " ")
}

# The Python to start: list(python, source), or an error (before any work) saying what was tried.
.find_python <- function() {
  choice <- .python_choice()
  if (!is.null(choice)) {
    why <- .probe_python(choice$python)
    if (nzchar(why)) .engine_error(sprintf("the Python set by %s (%s) cannot run it: %s.", choice$source,
                                           choice$python, why))
    return(choice)
  }
  tried <- character()
  for (py in .python_candidates()) {
    why <- .probe_python(py)
    if (!nzchar(why)) return(list(python = py, source = "search"))
    tried <- c(tried, sprintf("%s (%s)", py, why))
  }
  .engine_error(paste0("no Python with the engine was found",
                       if (length(tried)) paste0("; tried: ", paste(tried, collapse = "; ")) else "", "."))
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
              "\nSet options(gcn.mops.python = \"/path/to/python\") (or the environment variable GCNMOPS_PYTHON) ",
              "to a Python with gcnmops, numpy < 2 and rpy2 3.5 and call again; scripts/setup.sh of the gcnmops ",
              "repository makes one (.venv/bin/python), or gcn.mops::installEngine(\"/path/to/gcnmops\") ",
              "creates reticulate's virtual environment \"gcnmops\" with it."), call. = FALSE)
}

# The engine callback (an R function calling gcnmops.rbridge), set up once. Leaves R's random stream and
# the search path as they were.
.engine <- function() {
  if (!is.null(.state$engine_pid) && .state$engine_pid != Sys.getpid())
    stop(sprintf(paste("gcn.mops's engine was started in the parent R process (pid %d) and cannot run in a forked",
                       "copy of it (future's plan(multicore), parallel::mclapply): its OpenMP threads do not survive",
                       "fork(). Run the workers as separate R sessions (future::plan(multisession) or plan(cluster),",
                       "as gcn.MOPS's multi_gpu.R does), or fork them before the first gcn.mops call."),
                 .state$engine_pid), call. = FALSE)
  if (!is.null(.state$host_hook)) return(.state$host_hook)
  if (.python_host())
    stop(paste("gcn.mops runs inside a Python process (rpy2): call gcnmops.rbridge.attach() in Python",
               "before using gcn.mops from R there."), call. = FALSE)
  if (!requireNamespace("reticulate", quietly = TRUE)) .engine_error("the R package reticulate is not installed.")
  restore <- .rng_keeper()
  on.exit(restore(), add = TRUE)
  attached <- search()
  on.exit(.detach_new(attached), add = TRUE)
  if (!reticulate::py_available(initialize = FALSE)) {
    py <- .find_python()$python
    # RETICULATE_PYTHON is what reticulate honours first (before project files in the working
    # directory); restored once Python runs (the choice is then fixed for the session)
    withr::local_envvar(RETICULATE_PYTHON = py)
  }
  # tell rpy2 (imported by the engine) that this R process was not started by rpy2: Python copies the
  # environment when it starts (below), so the variable is restored once the engine runs
  if (!nzchar(Sys.getenv("R_SESSION_INITIALIZED", "")))
    withr::local_envvar(R_SESSION_INITIALIZED = sprintf("PID=%d:NAME=\"R\"", Sys.getpid()))
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
  res <- tryCatch(reticulate::py_run_string(code, convert = FALSE), error = function(e) e)
  failed <- inherits(res, "error")
  msg <- if (failed) conditionMessage(res) else ""
  rm(res)
  # one full collection (~0.45 s with Bioconductor loaded) finalizes the Python objects start-up made and
  # dropped (py_config's, this result), here where it is safe (see .collect_python_garbage)
  invisible(gc())
  if (failed) .engine_error(sprintf("in %s: %s", cfg$python, msg))
  if (is.null(.state$host_hook)) .engine_error("gcnmops.rbridge.attach() did not register its callback.")
  .state$reticulate <- TRUE
  .state$engine_pid <- Sys.getpid()
  .state$host_hook
}

# Detach what starting the engine attached (rpy2's start-up attaches package:tools).
.detach_new <- function(before) {
  for (nm in setdiff(search(), before))
    if (startsWith(nm, "package:")) try(detach(nm, character.only = TRUE), silent = TRUE)
}

# A function that puts R's random state (.Random.seed) back as it is now.
.rng_keeper <- function() {
  g <- globalenv()
  had <- exists(".Random.seed", envir = g, inherits = FALSE)
  seed <- if (had) get(".Random.seed", envir = g, inherits = FALSE)
  function() {
    if (had) assign(".Random.seed", seed, envir = g)
    else if (exists(".Random.seed", envir = g, inherits = FALSE)) rm(".Random.seed", envir = g)
  }
}

# A seed for the engine's random draws (DNAcopy's jitter and permutations) taken from R's random stream
# without advancing it: set.seed() before a call reproduces the call; the stream is left as it was.
.rng_seed <- function() {
  restore <- .rng_keeper()
  on.exit(restore())
  as.integer(stats::runif(1L, 1, .Machine$integer.max))
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
  n <- (.state$keys %||% 0) + 1
  .state$keys <- n
  key <- sprintf("k%.0f", n)
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
  restore <- .rng_keeper()
  on.exit(restore(), add = TRUE)
  key <- .bridge_register(env)
  on.exit(.bridge_unregister(key), add = TRUE)
  .collect_python_garbage()
  res <- hook(fun, key, ...)
  if (!is.null(res$error)) {
    .state$last_traceback <- res$traceback   # an engine bug's Python traceback, for a bug report
    .state$last_error <- res$error           # the engine's full message (with its details)
    stop(.cnmops_text(res$error), call. = FALSE)
  }
  for (m in unlist(res$messages)) message(m)
  for (w in unlist(res$warnings)) warning(w, call. = FALSE)
  res
}

# cn.mops's own words for the errors the engine finds: an engine message that begins with the stem of one
# of cn.mops's messages (the engine adds details: which sample, which region) is given in cn.mops's words;
# the engine's full message stays in gcn.mops:::.state$last_error.
.cnmops_errors <- c(
  "NAs in readcount matrix" = "NAs in readcount matrix.",
  "Zero columns in readcount matrix" = "Zero columns in readcount matrix.",
  "Median of the coverages is zero!" = "Median of the coverages is zero!",
  "Cases and controls must have the same length" = "Cases and controls must have the same length.",
  "Cases and controls must have the same ranges" = "Cases and controls must have the same ranges.",
  "No CNV regions in result object." = "No CNV regions in result object. Rerun cn.mops with different parameters!",
  "Only possible for referencecn.mops!" = "Only possible for referencecn.mops!")

.cnmops_text <- function(msg) {
  for (stem in names(.cnmops_errors)) if (startsWith(msg, stem)) return(.cnmops_errors[[stem]])
  msg
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
