# The agent's conversions as a fraction of memcpy of the same bytes.
#   gnuplot -e "in='bench/results/quant.csv'; out='bench/results/quant.png'" bench/plot/quant.gp
# The CSV is bench_quant --csv (any --impl); one panel per size (small, large:
# the sizes in bytes, defaults 256 KiB and 64 MiB), one bar per implementation.
if (!exists("in")) in = 'bench/results/quant.csv'
if (!exists("out")) out = 'bench/results/quant.png'
if (!exists("small")) small = 262144
if (!exists("large")) large = 67108864
set terminal pngcairo size 1500,600 font ",10"
set output out
set datafile separator ","
set style fill solid 0.8 border -1
set boxwidth 0.22
set grid ytics
set yrange [0:1.3]
set ylabel "throughput / memcpy"
set key top left
dtx(s) = s eq "fp32" ? 0 : s eq "bf16" ? 5 : s eq "fp16" ? 10 : 15
opx(s) = s eq "enc-sr" || s eq "enc" ? 0 : s eq "enc-rn" ? 1 : s eq "dec" ? 2 : 3
imx(s) = s eq "scalar" ? -0.25 : s eq "avx2" ? 0 : 0.25
xpos(a, b, c) = dtx(a) + opx(b) + imx(c)
set xtics ("fp32 enc-sr" 0, "enc-rn" 1, "dec" 2, "dec-avg" 3, \
           "bf16 enc-sr" 5, "enc-rn" 6, "dec" 7, "dec-avg" 8, \
           "fp16 enc-sr" 10, "enc-rn" 11, "dec" 12, "dec-avg" 13, \
           "int32 enc" 15, "" 16, "dec" 17, "dec-avg" 18) rotate by -35 font ",9"
set xrange [-0.8:18.8]
set multiplot layout 1,2 title "CAIS agent conversions vs memcpy of the same bytes (goal >= 0.5)"
do for [p = 1:2] {
	sz = p == 1 ? small : large
	set title sprintf("%s tensor", sz >= 1048576 ? sprintf("%d MiB", sz / 1048576) : sprintf("%d KiB", sz / 1024))
	plot in using (column(1) == sz && strcol(4) eq "scalar" ? xpos(strcol(2), strcol(3), strcol(4)) : 1/0):8 with boxes lc rgb "gray60" title "scalar", \
	     in using (column(1) == sz && strcol(4) eq "avx2" ? xpos(strcol(2), strcol(3), strcol(4)) : 1/0):8 with boxes lc rgb "#4477aa" title "avx2", \
	     in using (column(1) == sz && strcol(4) eq "avx512" ? xpos(strcol(2), strcol(3), strcol(4)) : 1/0):8 with boxes lc rgb "#ee6677" title "avx512", \
	     0.5 with lines dt 2 lw 2 lc rgb "black" title "goal 0.5"
}
unset multiplot
