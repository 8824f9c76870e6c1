# SPDX-License-Identifier: MIT
# fragsim: peak reserved memory per run against the lower bound, with OOM counts.  Each bar is
# the lower bound (grey: what the program needs at its peak, which no allocator can avoid)
# plus, in the run's colour, what the policy reserved beyond it.
#
# gnuplot -c compare.gp DATA OUT FORMAT TITLE UNIT LOWER CAPACITY
#   DATA      one line per run: y label up_to_lower_bound peak_reserved ooms colour value_label
#             oom_label (memory in UNIT, colour as an integer 0xRRGGBB, y = row from the bottom)
#   TITLE     the title (enhanced text, already escaped); UNIT the memory unit
#   LOWER     the lower bound (peak requested memory, in UNIT)
#   CAPACITY  the device's usable memory in UNIT, or - to leave it out
DATA = ARG1
UNIT = ARG5
LOWER = real(ARG6)
CAPACITY = ARG7
stats DATA using 4 nooutput
N = STATS_records
RIGHT = STATS_max > LOWER ? STATS_max : LOWER
if (CAPACITY ne "-" && real(CAPACITY) > RIGHT) { RIGHT = real(CAPACITY) }
if (RIGHT <= 0) { RIGHT = 1 }
if (ARG3 eq "svg") {
    set terminal svg size 1100,(220 + 62 * N) dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1100,(220 + 62 * N) enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",14"
set xlabel sprintf("peak reserved memory (%s)", UNIT)
set border 1 lc rgb "#555555"
set xtics nomirror out
set ytics noenhanced scale 0 font ",12"
set grid xtics lc rgb "#e8e8e8" lw 1 dt 1
set xrange [0:RIGHT * 1.6]
set yrange [-0.7:N - 0.3]
set key outside below center horizontal maxrows 2 samplen 2 width 1
set bmargin 8
set style fill solid 0.9 noborder
set arrow 1 from first LOWER, graph 0 to first LOWER, graph 1 nohead lw 1.5 dt 2 lc rgb "black" front
if (CAPACITY ne "-") {
    set arrow 2 from first real(CAPACITY), graph 0 to first real(CAPACITY), graph 1 nohead \
        lw 2 lc rgb "#d62728" front
}
# Labels start right of the bar, or of the lines they would cross.
LABELX = (CAPACITY ne "-" && real(CAPACITY) > LOWER) ? real(CAPACITY) : LOWER
CAPTITLE = (CAPACITY ne "-") ? sprintf("device capacity: %.3g %s", real(CAPACITY), UNIT) : ""
plot DATA using (0):1:(0):3:($1 - 0.3):($1 + 0.3):ytic(2) with boxxyerror lc rgb "#c8ccd2" \
         title "lower bound (what the program needs at its peak)", \
     DATA using (0):1:3:4:($1 - 0.3):($1 + 0.3):6 with boxxyerror lc rgb variable notitle, \
     NaN with boxes lc rgb "#7f96b8" title "reserved beyond it (the policy's overhead, in its colour)", \
     DATA using ($4 > LABELX ? $4 : LABELX):1:7 with labels left offset 1.5, 0.45 noenhanced \
         notitle, \
     DATA using ($4 > LABELX ? $4 : LABELX):1:8 with labels left offset 1.5, -0.6 \
         tc rgb "#d62728" noenhanced notitle, \
     NaN with lines lw 1.5 dt 2 lc rgb "black" \
         title sprintf("lower bound (peak requested): %.3g %s", LOWER, UNIT), \
     NaN with lines lw 2 lc rgb "#d62728" title CAPTITLE
