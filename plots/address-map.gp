# SPDX-License-Identifier: MIT
# fragsim: the address map of one run at one moment (its peak, an OOM): one horizontal bar per
# segment, or per page of mapped memory (expandable segments), to scale, coloured by what its
# bytes are: live (requested by a live block), rounding, free releasable (a whole free segment or
# page: the allocator can give it back) and free pinned (free, but sharing its segment or page
# with a live block).  The live blocks that pin the most free memory are outlined.
#
# gnuplot -c address-map.gp DATA OUT FORMAT TITLE UNIT COUNTS XMAX LEGEND
#   DATA    block 0: "x0 x1 y0 y1 class" (offset in the row, in UNIT; class 0 live, 1 rounding,
#           2 releasable, 3 pinned); block 1: outlines "x0 x1 y0 y1 0"; block 2: "y name"
#   TITLE   the title (enhanced text, already escaped); UNIT the memory unit of x
#   COUNTS  "ROWS NAMED": rows drawn, and 1 to name each on the y axis
#   XMAX    the widest row, in UNIT
#   LEGEND  the legend's five entries, each double-quoted
reset
DATA = ARG1
ROWS = int(word(ARG6, 1))
NAMED = int(word(ARG6, 2))
XMAX = real(ARG7)
if (XMAX <= 0) { XMAX = 1 }
LEGEND = ARG8
entry(i) = word(LEGEND, i)
HEIGHT = 230 + 13 * ROWS
if (HEIGHT < 480) { HEIGHT = 480 }
if (ARG3 eq "svg") {
    set terminal svg size 1200,HEIGHT dynamic enhanced font "sans,12" background rgb "white"
} else {
    set terminal pngcairo size 1200,HEIGHT enhanced font "sans,11" background rgb "white"
}
set output ARG2
set title ARG4 font ",12"
set xlabel sprintf("offset in the segment or page (%s)", ARG5)
set format x "%g"
set border 3 lc rgb "#555555"
set xtics nomirror out
set grid xtics lc rgb "#e8e8e8" lw 1 dt 1
set xrange [0:XMAX * 1.01]
set yrange [-0.6:(ROWS > 0 ? ROWS : 1) - 0.4]
if (NAMED) {
    set ytics nomirror scale 0 font ",9"
    set ylabel "segments and pages, by address"
} else {
    unset ytics
    set ylabel sprintf("%d segments and pages, by address (top: lowest)", ROWS)
}
set key outside below center horizontal maxrows 2 samplen 2 width 2 noenhanced
set palette maxcolors 4
set palette defined (0 "#4e79a7", 1 "#f2b134", 2 "#8cd17d", 3 "#e15759")
set cbrange [-0.5:3.5]
unset colorbox
plot \
    DATA index 0 using (($1+$2)/2):(($3+$4)/2):1:2:3:4:5 with boxxyerror \
        fs solid 1.0 noborder lc palette notitle, \
    DATA index 1 using (($1+$2)/2):(($3+$4)/2):1:2:3:4 with boxxyerror \
        fs empty border lc rgb "#111111" lc rgb "#111111" lw 1.5 notitle, \
    DATA index 2 using (0):1:ytic(2) with dots lc rgb "white" notitle, \
    NaN with boxes fs solid 1.0 lc rgb "#4e79a7" title entry(1), \
    NaN with boxes fs solid 1.0 lc rgb "#f2b134" title entry(2), \
    NaN with boxes fs solid 1.0 lc rgb "#8cd17d" title entry(3), \
    NaN with boxes fs solid 1.0 lc rgb "#e15759" title entry(4), \
    NaN with boxes fs empty border lc rgb "#111111" lw 1.5 title entry(5)
unset output
