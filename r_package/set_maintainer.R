# Sets the maintainer of the R package gcn.mops (Authors@R's "cre", a placeholder until set) before the package is
# built for a release or a Bioconductor submission.
# Run from r_package/: Rscript set_maintainer.R "Given" "Family" "email@address"
args <- commandArgs(TRUE)
if (length(args) != 3L) stop("usage: Rscript set_maintainer.R GIVEN FAMILY EMAIL", call. = FALSE)
path <- file.path("gcn.mops", "DESCRIPTION")
text <- readLines(path)
at <- grep("person(\"Package\", \"Maintainer\"", text, fixed = TRUE)
if (length(at) != 1L || !grepl("placeholder", text[at + 1L], fixed = TRUE))
  stop("the maintainer placeholder is not in ", path, " (already set?)", call. = FALSE)
text[at] <- sprintf("    person(%s, %s, role = c(\"aut\", \"cre\"), email = %s),",
                    deparse(args[1L]), deparse(args[2L]), deparse(args[3L]))
text <- text[-(at + 1L)]
writeLines(text, path)
desc <- read.dcf(path)
cat("Maintainer:", format(eval(parse(text = desc[1L, "Authors@R"]))[1L]), "\n")
