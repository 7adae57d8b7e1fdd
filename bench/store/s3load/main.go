// s3load: a small S3 load generator in the manner of MinIO's warp, used by
// bench/store/run_s3.sh because warp itself cannot be installed here (the
// Go module proxy refuses github.com/minio/warp). It drives any S3 endpoint
// (path-style, SigV4, region us-east-1) through one of two clients, each
// with its default options (-client, client.go): MinIO's own library
// (minio-go: signed 64 KiB chunks over plain HTTP and multipart above 16
// MiB, as warp does by default through the same library), or the AWS SDK
// for Go v2 (one PutObject per object: over plain HTTP a signed payload with
// an x-amz-checksum-crc32 header, over HTTPS (-https) aws-chunked with the
// CRC32 in a trailer; GETs with checksum mode on).
//
// One benchmark per run, closed loop: -concurrent workers issue requests
// back to back for -duration, after the objects a GET or mixed run reads
// have been uploaded (not timed); with -rate R the workers offer R requests
// per second in all on a fixed schedule instead, and latency counts from
// each request's scheduled time. Ops:
//
//	put    every request uploads a new object of -size bytes
//	get    -objects objects are uploaded, then read at random (whole body)
//	mixed  warp's default mix over -objects objects: 45% GET, 30% STAT,
//	       15% PUT (a new object), 10% DELETE (of a random existing one)
//	first  every one of the -objects objects read once, -concurrent at a
//	       time, each read measured (-duration is not used): the first
//	       reads after an upload, cold when the caller has dropped the page
//	       cache (bench/store/run_s3.sh does)
//	prepare  only upload the -objects objects (then get/mixed -prepared)
//	clear    only delete every object under -prefix
//
// With -warm every object is read once before the clock starts (not
// measured), so a get or mixed run measures reads of objects read before,
// as in a long run, not the first read of each (see first).
//
// Every GET checks the body's length and its first and last 8 bytes (an
// object's bytes start and end with its own key index; with -prehash only
// the last 8, and the SDK checks the whole body's CRC32), so a store that
// answers with the wrong object or a short body counts an error.
//
// -prehash (sdk, plain HTTP) keeps the generator from being what a large
// PUT waits for: by default the SDK reads each body twice before sending it
// (SHA-256 for the signed payload and CRC32, in one pass: 64 ms per 64 MiB
// alone on the benchmark VM, 233 ms with four workers on the generator's
// one core), and with two cores the server sat idle a third of the phase.
// With -prehash the SDK gets both values as inputs (ChecksumCRC32, and the
// payload hash the signer would have computed), finished per body from the
// shared bytes' saved SHA-256 and CRC32 state: the request on the wire is
// byte for byte the SDK's default one.
//
// Prints one JSON object: per op type the count, errors, bytes, ops/s,
// MiB/s and client-side latency percentiles (ms), and the first errors.
// The bucket's objects are deleted at the end unless -noclear.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type sample struct {
	op    string
	lat   time.Duration
	at    time.Duration // when it started, from the phase's start
	bytes int64
	err   error
	key   int64
}

type stats struct {
	Ops     int     `json:"ops"`
	Errors  int     `json:"errors"`
	Bytes   int64   `json:"bytes"`
	OpsPerS float64 `json:"ops_per_s"`
	MiBPerS float64 `json:"mib_per_s"`
	P50ms   float64 `json:"p50_ms"`
	P90ms   float64 `json:"p90_ms"`
	P99ms   float64 `json:"p99_ms"`
	P999ms  float64 `json:"p999_ms"`
}

var (
	endpoint   = flag.String("endpoint", "127.0.0.1:9000", "host:port")
	access     = flag.String("access-key", "", "access key")
	secret     = flag.String("secret-key", "", "secret key")
	bucket     = flag.String("bucket", "s3load", "bucket (created when missing)")
	op         = flag.String("op", "put", "put | get | mixed | first | prepare | clear")
	size       = flag.Int64("size", 4096, "object size in bytes")
	concurrent = flag.Int("concurrent", 8, "workers")
	duration   = flag.Duration("duration", 10*time.Second, "measured time")
	objects    = flag.Int("objects", 200, "objects uploaded first for get and mixed")
	noclear    = flag.Bool("noclear", false, "keep the objects at the end")
	prepared   = flag.Bool("prepared", false, "objects 1..-objects exist already (from -op prepare)")
	prefix     = flag.String("prefix", "obj", "key prefix")
	rate       = flag.Float64("rate", 0, "offered load in requests/s over all workers (0: closed loop)")
	warm       = flag.Bool("warm", false, "read every object once before the clock starts")
	trace      = flag.String("trace", "", "also write every request to this file: worker, op, start and latency in ms (after a first line \"# start UNIXTIME\", the phase's start)")
	clientKind = flag.String("client", "minio", "minio (minio-go) | sdk (AWS SDK for Go v2): see client.go")
	https      = flag.Bool("https", false, "TLS to the endpoint (certificate not verified)")
	prehash    = flag.Bool("prehash", false, "sdk over plain HTTP: the generator hands the SDK each body's SHA-256 and CRC32, finished from the shared bytes' saved state (see client.go); object bytes then carry their index in the last 8 bytes only")
)

// GETs whose answer carried a whole-object x-amz-checksum-crc32 that the
// client checked (sdk only).
var crcChecked atomic.Int64

func keyName(i int64) string { return fmt.Sprintf("%s/%09d", *prefix, i) }

// body returns the object for key index i: the shared random bytes with i in
// the first and last 8 bytes (buf is the worker's own copy). With -prehash
// only the last 8 carry it, so every body shares all bytes before them and
// their hashes can start from one saved state; the SDK's GETs check the
// whole body against its CRC32 then.
func body(buf []byte, i int64) []byte {
	n := len(buf)
	if n >= 16 {
		if !*prehash {
			binary.LittleEndian.PutUint64(buf[0:8], uint64(i))
		}
		binary.LittleEndian.PutUint64(buf[n-8:], uint64(i))
	}
	return buf
}

func check(got []byte, n int64, i int64) error {
	if int64(len(got)) != n {
		return fmt.Errorf("key %d: body of %d bytes, want %d", i, len(got), n)
	}
	if n >= 16 && ((!*prehash && binary.LittleEndian.Uint64(got[0:8]) != uint64(i)) ||
		binary.LittleEndian.Uint64(got[n-8:]) != uint64(i)) {
		return fmt.Errorf("key %d: body carries another object's index", i)
	}
	return nil
}

func main() {
	flag.Parse()
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	cl, err := newClient(*clientKind, tr)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	if err := cl.ensureBucket(ctx); err != nil {
		fail(err)
	}
	src := make([]byte, *size)
	rand.New(rand.NewSource(1)).Read(src)
	if *prehash {
		sc, ok := cl.(*sdkClient)
		if !ok || *https || *size < 16 {
			fail(fmt.Errorf("-prehash: only with -client sdk over plain HTTP, -size >= 16"))
		}
		sc.pre = newPrehash(src[:*size-8])
	}

	// The pool of existing keys (get and mixed pick from it).
	var mu sync.Mutex
	live := []int64{}
	alive := map[int64]bool{} // mixed: a GET/HEAD racing a DELETE of its key is no error
	var next int64
	newKey := func() int64 { mu.Lock(); defer mu.Unlock(); next++; return next }
	put := func(buf []byte, i int64) error {
		return cl.put(ctx, keyName(i), body(buf, i))
	}
	if *op == "clear" {
		if err := cl.clear(ctx, *prefix+"/"); err != nil {
			fail(fmt.Errorf("clear: %w", err))
		}
		return
	}
	if *prepared {
		for i := int64(1); i <= int64(*objects); i++ {
			live = append(live, i)
			alive[i] = true
		}
		next = int64(*objects)
	} else if *op != "put" {
		var wg sync.WaitGroup
		errc := make(chan error, *concurrent)
		ids := make(chan int64)
		for w := 0; w < *concurrent; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := append([]byte(nil), src...)
				for i := range ids {
					if err := put(buf, i); err != nil {
						errc <- fmt.Errorf("prepare PUT %s: %w", keyName(i), err)
						return
					}
				}
			}()
		}
	feed:
		for n := 0; n < *objects; n++ {
			i := newKey()
			select {
			case ids <- i:
				live = append(live, i)
				alive[i] = true
			case err := <-errc:
				fail(err)
				break feed
			}
		}
		close(ids)
		wg.Wait()
		select {
		case err := <-errc:
			fail(err)
		default:
		}
	}
	if *op == "prepare" {
		return
	}

	// Each worker's buffers are made and touched before the clock starts: a
	// GET reads into rbufs[w] (room for bytes.Buffer's MinRead past the body,
	// so it never grows), and the first request of a worker must not pay for
	// this process's page faults (64 MiB of fresh memory is tens of ms).
	bufs := make([][]byte, *concurrent)
	rbufs := make([][]byte, *concurrent)
	for w := range bufs {
		bufs[w] = append([]byte(nil), src...)
		if *op == "put" {
			continue // reads nothing
		}
		rbufs[w] = make([]byte, *size+bytes.MinRead)
		for j := 0; j < len(rbufs[w]); j += 4096 {
			rbufs[w][j] = 1
		}
	}
	getInto := func(rbuf []byte, i int64) ([]byte, error) {
		w := bytes.NewBuffer(rbuf[:0])
		err := cl.get(ctx, keyName(i), w)
		if err == nil {
			err = check(w.Bytes(), *size, i)
		}
		return w.Bytes(), err
	}
	if *warm && *op != "put" {
		var wg sync.WaitGroup
		for w := 0; w < *concurrent; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for j := w; j < len(live); j += *concurrent {
					if _, err := getInto(rbufs[w], live[j]); err != nil {
						fail(fmt.Errorf("warm-up GET %s: %w", keyName(live[j]), err))
					}
				}
			}(w)
		}
		wg.Wait()
	}
	firstNext := 0 // first: the next of live to read
	samples := make([][]sample, *concurrent)
	start := time.Now()
	stop := start.Add(*duration)
	if *op == "first" {
		stop = start.Add(time.Hour) // ends when every object has been read
	}
	var wg sync.WaitGroup
	for w := 0; w < *concurrent; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 7))
			buf, rbuf := bufs[w], rbufs[w][:0]
			pick := func(remove bool) (int64, bool) {
				mu.Lock()
				defer mu.Unlock()
				if len(live) == 0 {
					return 0, false
				}
				j := rng.Intn(len(live))
				i := live[j]
				if remove {
					live[j] = live[len(live)-1]
					live = live[:len(live)-1]
					delete(alive, i)
				}
				return i, true
			}
			// With -rate each worker has a schedule (every concurrent/rate
			// seconds, staggered); a request's latency runs from its
			// scheduled time, so a server that falls behind is charged
			// for the queueing too.
			var every time.Duration
			sched := start
			if *rate > 0 {
				every = time.Duration(float64(*concurrent) / *rate * float64(time.Second))
				sched = start.Add(every * time.Duration(w) / time.Duration(*concurrent))
			}
		requests:
			for time.Now().Before(stop) {
				if every > 0 {
					if d := time.Until(sched); d > 0 {
						time.Sleep(d)
					}
					if !sched.Before(stop) {
						break
					}
				}
				kind := *op
				if kind == "first" {
					kind = "get"
				}
				if *op == "mixed" {
					switch r := rng.Intn(100); {
					case r < 45:
						kind = "get"
					case r < 75:
						kind = "stat"
					case r < 90:
						kind = "put"
					default:
						kind = "delete"
					}
				}
				t0 := time.Now()
				if every > 0 {
					t0 = sched
					sched = sched.Add(every)
				}
				var s sample
				switch kind {
				case "put":
					i := newKey()
					s.err = put(buf, i)
					s.bytes = *size
					if s.err == nil && *op == "mixed" {
						mu.Lock()
						live = append(live, i)
						alive[i] = true
						mu.Unlock()
					}
				case "get":
					var i int64
					ok := false
					if *op == "first" {
						mu.Lock()
						if firstNext < len(live) {
							i, ok = live[firstNext], true
							firstNext++
						}
						mu.Unlock()
						if !ok {
							break requests
						}
					} else if i, ok = pick(false); !ok {
						continue
					}
					s.key = i
					rbuf, s.err = getInto(rbuf, i)
					s.bytes = int64(len(rbuf))
				case "stat":
					i, ok := pick(false)
					if !ok {
						continue
					}
					s.key = i
					var n int64
					if n, s.err = cl.stat(ctx, keyName(i)); s.err == nil && n != *size {
						s.err = fmt.Errorf("HEAD %s: size %d, want %d", keyName(i), n, *size)
					}
				case "delete":
					i, ok := pick(true)
					if !ok {
						continue
					}
					s.err = cl.del(ctx, keyName(i))
				}
				s.op, s.lat, s.at = kind, time.Since(t0), t0.Sub(start)
				if s.err != nil && *op == "mixed" && (kind == "get" || kind == "stat") {
					mu.Lock()
					gone := !alive[s.key]
					mu.Unlock()
					if gone {
						continue
					}
				}
				samples[w] = append(samples[w], s)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()

	if *trace != "" {
		f, err := os.Create(*trace)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(f, "# start %.6f\n", float64(start.UnixMicro())/1e6)
		for w, ss := range samples {
			for _, s := range ss {
				fmt.Fprintf(f, "%d %s %.3f %.3f\n", w, s.op, float64(s.at.Microseconds())/1000,
					float64(s.lat.Microseconds())/1000)
			}
		}
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
	byOp := map[string][]sample{}
	var errs []string
	for _, ss := range samples {
		for _, s := range ss {
			byOp[s.op] = append(byOp[s.op], s)
			byOp["total"] = append(byOp["total"], s)
			if s.err != nil && len(errs) < 10 {
				errs = append(errs, s.op+": "+s.err.Error())
			}
		}
	}
	out := map[string]any{"op": *op, "size": *size, "concurrent": *concurrent, "rate": *rate,
		"duration_s": elapsed, "objects": *objects, "first_errors": errs,
		"client": *clientKind, "https": *https}
	if pm := getPayloadMode(); pm != "" {
		out["put_payload"] = pm
	}
	if *clientKind == "sdk" {
		out["get_crc32_checked"] = crcChecked.Load()
		putReadyMu.Lock()
		if n := len(putReady); n > 0 {
			ms := make([]float64, n)
			for i, d := range putReady {
				ms[i] = float64(d.Microseconds()) / 1000
			}
			sort.Float64s(ms)
			out["sdk_put_prepare_ms"] = map[string]float64{"p50": ms[n/2], "p99": ms[min(n-1, n*99/100)]}
		}
		putReadyMu.Unlock()
	}
	res := map[string]stats{}
	for name, ss := range byOp {
		var st stats
		lat := make([]float64, 0, len(ss))
		for _, s := range ss {
			if s.err != nil {
				st.Errors++
				continue
			}
			st.Ops++
			st.Bytes += s.bytes
			lat = append(lat, float64(s.lat.Microseconds())/1000)
		}
		sort.Float64s(lat)
		q := func(p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			k := int(p * float64(len(lat)))
			if k >= len(lat) {
				k = len(lat) - 1
			}
			return lat[k]
		}
		st.OpsPerS = float64(st.Ops) / elapsed
		st.MiBPerS = float64(st.Bytes) / elapsed / (1 << 20)
		st.P50ms, st.P90ms, st.P99ms, st.P999ms = q(0.50), q(0.90), q(0.99), q(0.999)
		res[name] = st
	}
	out["results"] = res

	if !*noclear {
		if err := cl.clear(ctx, *prefix+"/"); err != nil {
			out["clear_error"] = err.Error()
		}
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "s3load:", err)
	os.Exit(1)
}
