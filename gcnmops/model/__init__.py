"""The per-region Poisson-mixture model: one EM source (em.py), a CPU driver and a GPU driver."""
