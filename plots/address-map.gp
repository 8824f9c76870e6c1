# SPDX-License-Identifier: MIT
# fragsim: address map of one run, like PyTorch's segment timeline: time on x, device address on
# y; segments (memory the allocator holds) in grey, allocations in colour, OOMs in red.
#
# gnuplot -c address-map.gp DATA OUT FORMAT TITLE XLABEL UNIT COUNTS TOP
#   DATA    one rectangle a line (x0 x1 y0 y1 colour, colour as an integer 0xRRGGBB) in block
#           0: cudaMalloc segments, 1: ranges mapped into reservations (expandable segments,
#           pages), 2: allocations; block 3: the x of each OOM.  Addresses are in UNIT, with the
#           gaps between segments removed.
#   TITLE   the title (enhanced text, already escaped); XLABEL the x axis label
#   COUNTS  "segments mapped allocations ooms": how many lines of each block are real (an empty
#           block has one placeholder line)
#   TOP     the highest address (in UNIT)
DATA = ARG1
COUNTS = ARG7
NS = int(word(COUNTS, 1))
NM = int(word(COUNTS, 2))
NB = int(word(COUNTS, 3))
NO = int(word(COUNTS, 4))
TOP = real(ARG8)
if (TOP <= 0) { TOP = 1 }
if (ARG3 eq "svg") {
    set terminal svg size 1200,720 dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1200,720 enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",13"
set xlabel ARG5
set ylabel sprintf("device address (%s, gaps between segments removed)", ARG6)
set border 3 lc rgb "#555555"
set tics nomirror out
set autoscale xfix
set yrange [0:TOP * 1.02]
set key outside below center horizontal samplen 2
plot \
    DATA index 0 using (($1+$2)/2):(($3+$4)/2):1:2:3:4 with boxxyerror \
        fs solid 0.25 border lc rgb "#9a9a9a" lc rgb "#c8c8c8" \
        title (NS > 0 ? "cudaMalloc segments (memory held)" : ""), \
    DATA index 1 using (($1+$2)/2):(($3+$4)/2):1:2:3:4 with boxxyerror \
        fs solid 0.25 noborder lc rgb "#b8b8b8" \
        title (NM > 0 ? "mapped memory (memory held)" : ""), \
    DATA index 2 using (($1+$2)/2):(($3+$4)/2):1:2:3:4:5 with boxxyerror \
        fs solid 0.9 noborder lc rgb variable notitle, \
    NaN with boxes fs solid 0.9 lc rgb "#4e79a7" title (NB > 0 ? "allocations" : ""), \
    DATA index 3 using 1:(NO > 0 ? TOP * 1.02 : NaN) with impulses lw 1.5 lc rgb "#d62728" \
        title (NO > 0 ? "simulated OOM" : "")
