# SPDX-License-Identifier: MIT
# fragsim: the capacity each run needs (needed_bytes: the least device capacity on which it has
# no OOM), one bar per run, against the lower bound (the peak of requested memory, which no
# allocator can beat).  A run that ran out of memory on its device is drawn failed: hatched, in
# red, with its first OOM; a run that could not be carried out has no bar and says why; the
# recording's own peak (a snapshot's `recorded` run) is outlined in black.
#
# gnuplot -c compare.gp DATA OUT FORMAT TITLE UNIT LOWER CAPACITY DEVICE KINDS
#   DATA      one line per run: y label bar kind colour text (bar in UNIT; kind 0 needs,
#             1 failed, 2 error, 3 recorded, 4 peak reserved; colour 0xRRGGBB; y from the bottom)
#   TITLE     the title (enhanced text, already escaped); UNIT the memory unit
#   LOWER     the lower bound in UNIT
#   CAPACITY  the device's usable memory in UNIT, or - to leave it out; DEVICE its name
#   KINDS     "FAILED RECORDED ERROR": 1 where some run is of that kind (its legend entry)
reset
HAS_FAILED = int(word(ARG9, 1))
HAS_RECORDED = int(word(ARG9, 2))
HAS_ERROR = int(word(ARG9, 3))
DATA = ARG1
UNIT = ARG5
LOWER = real(ARG6)
CAPACITY = ARG7
stats DATA using 3 nooutput
N = STATS_records
RIGHT = STATS_max > LOWER ? STATS_max : LOWER
if (CAPACITY ne "-" && real(CAPACITY) > RIGHT) { RIGHT = real(CAPACITY) }
if (RIGHT <= 0) { RIGHT = 1 }
HEIGHT = 260 + 46 * N
if (ARG3 eq "svg") {
    set terminal svg size 1200,HEIGHT dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1200,HEIGHT enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",12"
set xlabel sprintf("capacity the run needs (%s)", UNIT)
set format x "%g"
set border 1 lc rgb "#555555"
set xtics nomirror out
set ytics noenhanced scale 0 font ",11"
set grid xtics lc rgb "#e8e8e8" lw 1 dt 1
# Room on the right for the text beside the longest bar (two short lines at most).
set xrange [0:RIGHT * 1.6]
set yrange [-0.7:N - 0.3]
set key outside below center horizontal maxcols 2 samplen 2 width 1 noenhanced
set arrow 1 from first LOWER, graph 0 to first LOWER, graph 1 nohead lw 1.5 dt 2 lc rgb "black" front
if (CAPACITY ne "-") {
    set arrow 2 from first real(CAPACITY), graph 0 to first real(CAPACITY), graph 1 nohead \
        lw 2 lc rgb "#d62728" front
}
CAPTITLE = (CAPACITY ne "-") ? sprintf("%s: %.3g %s usable", ARG8, real(CAPACITY), UNIT) : ""
ok(k, v) = (k == 0 || k == 4) ? v : NaN
failed(k, v) = (k == 1) ? v : NaN
recorded(k, v) = (k == 3) ? v : NaN
# The text starts right of the bar, and of the lines it would cross.
CAPX = (CAPACITY ne "-") ? real(CAPACITY) : 0
TEXTX(bar) = (bar > LOWER ? (bar > CAPX ? bar : CAPX) : (LOWER > CAPX ? LOWER : CAPX))
plot DATA using (0):1:ytic(2) with dots lc rgb "white" notitle, \
     DATA using (0):1:(0):(ok($4, $3)):($1 - 0.32):($1 + 0.32):5 with boxxyerror \
         fs solid 0.85 noborder lc rgb variable notitle, \
     DATA using (0):1:(0):(failed($4, $3)):($1 - 0.32):($1 + 0.32) with boxxyerror \
         fs pattern 4 border lc rgb "#d62728" lc rgb "#d62728" \
         title (HAS_FAILED ? "failed: out of memory on this device (hatched; it needs the bar's length)" : ""), \
     DATA using (0):1:(0):(recorded($4, $3)):($1 - 0.32):($1 + 0.32) with boxxyerror \
         fs pattern 5 border lc rgb "#000000" lw 2 lc rgb "#000000" \
         title (HAS_RECORDED ? "recorded: what the recording's GPU reserved at its peak" : ""), \
     DATA using (TEXTX($3)):1:6 with labels left offset 1, 0 noenhanced notitle, \
     DATA using ($4 == 2 ? 0 : NaN):1 with points pt 2 ps 2 lw 2 lc rgb "#d62728" \
         title (HAS_ERROR ? "error: the run could not be carried out" : ""), \
     NaN with lines lw 1.5 dt 2 lc rgb "black" \
         title sprintf("lower bound (peak requested): %.3g %s; (+N%%): how far above it", LOWER, UNIT), \
     NaN with lines lw 2 lc rgb "#d62728" title CAPTITLE
unset output
