library(testthat)
library(gcn.mops)
test_check("gcn.mops")
