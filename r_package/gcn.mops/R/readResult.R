# readResult(): the CNVDetectionResult of a folder written by the command line (gcnmops run, also --stream) or
# by Python's write_result(). The engine's Python reads the folder (Parquet through pyarrow, else the TSV
# matrices), so R needs no arrow package; the result is built as gcn.mops() builds its own.
readResult <- function(path) {
  if (!(is.character(path) && length(path) == 1L && dir.exists(path)))
    stop(sprintf("readResult() takes the path of a result folder (the output folder of gcnmops run); %s is not a folder.",
                 if (is.character(path) && length(path) == 1L) sprintf("\"%s\"", path) else deparse(path)[1L]),
         call. = FALSE)
  env <- new.env(parent = emptyenv())
  env$path <- normalizePath(path)
  .call_engine("read_result_from_r", env)
  .build_result(env)
}
