"""R- and glibc-exact scalar primitives: glibc's exp/log (libm), R's lgamma (rmath), R's long-double means,
medians and type-7 quantiles (rstats), R's pt() through TOMS 708 (toms708, tdist), density() modes (density).

Every function here reproduces its reference bit for bit: the order of operations is the contract. Nothing
here imports another part of gcnmops.
"""
