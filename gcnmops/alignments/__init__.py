"""Read counts from alignments: BAM and CRAM files counted in windows or given regions (``gcnmops count``).

``counting.count_reads`` is the entry; ``bam`` holds the native BGZF/BAM record scanner (and pysam's route for
CRAM), ``bamheader`` the headers and indexes, ``regions`` the windows, regions and counting plan.
"""
