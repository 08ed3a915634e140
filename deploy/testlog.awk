# deploy/testlog.awk: reads `go test -json` (compat.sh runs it) and keeps a
# CI log readable. The whole -v text goes to the file named by logfile; stdout
# gets one line per package, the full output of each failed test and of each
# failed package, and at the end the count of passed, skipped and failed
# tests (subtests included) with every skipped test and its reason. The file
# named by summary gets a line "skip PACKAGE TEST: REASON" or
# "fail PACKAGE TEST" per skipped or failed test, and at the end
# "counts PASSED SKIPPED FAILED". Lines that are not JSON (go's own
# messages) pass through to stdout and logfile. Run it with LC_ALL=C: it
# decodes JSON byte by byte.
#
#   go test -json ./... 2>&1 | LC_ALL=C awk -v logfile=FILE -v summary=FILE -f deploy/testlog.awk

BEGIN {
	module = "github.com/relay-demo/relay/"
	passed = skipped = failed = 0
	printf "" >logfile
	printf "" >summary
}

# str returns the JSON string value of key in line, decoded; "" if absent.
# An unescaped `"key":"` can only be a key: inside a string value every
# quote is escaped.
function str(line, key,    i, s, out, c, e) {
	i = index(line, "\"" key "\":\"")
	if (i == 0)
		return ""
	s = substr(line, i + length(key) + 4)
	out = ""
	while (match(s, /["\\]/)) {
		out = out substr(s, 1, RSTART - 1)
		c = substr(s, RSTART, 1)
		if (c == "\"")
			return out
		e = substr(s, RSTART + 1, 1)
		if (e == "n") out = out "\n"
		else if (e == "t") out = out "\t"
		else if (e == "r") out = out "\r"
		else if (e == "b") out = out "\b"
		else if (e == "f") out = out "\f"
		else if (e == "u") {
			out = out utf8(hex(substr(s, RSTART + 2, 4)))
			s = substr(s, RSTART + 6)
			continue
		} else out = out e
		s = substr(s, RSTART + 2)
	}
	return out s
}

function hex(h,    n, i) {
	n = 0
	for (i = 1; i <= length(h); i++)
		n = n * 16 + index("0123456789abcdef", tolower(substr(h, i, 1))) - 1
	return n
}

# utf8 encodes code point n (JSON's \u escapes: below 0x80 mostly).
function utf8(n) {
	if (n < 128)
		return sprintf("%c", n)
	if (n < 2048)
		return sprintf("%c%c", 192 + int(n / 64), 128 + n % 64)
	return sprintf("%c%c%c", 224 + int(n / 4096), 128 + int(n / 64) % 64, 128 + n % 64)
}

function short(pkg) {
	return index(pkg, module) == 1 ? substr(pkg, length(module) + 1) : pkg
}

# reason is the last log line of a test's output ("    file.go:12: why"),
# which for a skipped test is what it gave to Skip.
function reason(text,    n, lines, i, r) {
	n = split(text, lines, "\n")
	r = ""
	for (i = 1; i <= n; i++)
		if (lines[i] ~ /^[ \t]+[^ \t]+\.go:[0-9]+: /) {
			r = lines[i]
			sub(/^[ \t]+/, "", r)
		}
	return r
}

!/^\{/ {
	print
	print >>logfile
	fflush()
	next
}

{
	action = str($0, "Action")
	pkg = str($0, "Package")
	test = str($0, "Test")
	key = pkg SUBSEP test
}

action == "build-output" {
	o = str($0, "Output")
	printf "%s", o
	printf "%s", o >>logfile
	fflush()
	next
}

action == "output" {
	o = str($0, "Output")
	printf "%s", o >>logfile
	if (test != "")
		out[key] = out[key] o
	else
		pkgout[pkg] = pkgout[pkg] o
	next
}

test != "" && action == "pass" {
	passed++
	delete out[key]
	next
}

test != "" && action == "skip" {
	skipped++
	line = short(pkg) " " test ": " reason(out[key])
	skips[skipped] = line
	print "skip " line >>summary
	delete out[key]
	next
}

test != "" && action == "fail" {
	failed++
	printf "%s", out[key]
	print "fail " short(pkg) " " test >>summary
	delete out[key]
	fflush()
	next
}

test == "" && (action == "pass" || action == "fail") {
	if (action == "fail") {
		# What the package printed outside its tests, and the output of
		# tests that never ended (a timeout, a panic).
		for (k in out) {
			split(k, parts, SUBSEP)
			if (parts[1] == pkg) {
				printf "%s", out[k]
				delete out[k]
			}
		}
		printf "%s", pkgout[pkg]
	} else {
		n = split(pkgout[pkg], lines, "\n")
		for (i = 1; i <= n; i++)
			if (lines[i] ~ /^ok[ \t]/)
				print lines[i]
	}
	delete pkgout[pkg]
	# Each package's line as it ends: CI logs are read while they run.
	fflush()
	next
}

END {
	printf "%d passed, %d skipped, %d failed (tests and subtests)\n", passed, skipped, failed
	# Each reason cut to a line; the log has it whole.
	for (i = 1; i <= skipped; i++)
		print "   --- SKIP: " (length(skips[i]) > 220 ? substr(skips[i], 1, 217) "..." : skips[i])
	printf "counts %d %d %d\n", passed, skipped, failed >>summary
}
