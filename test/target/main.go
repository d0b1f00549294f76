// Command target is cri-prober's test target, in the spirit of Kubernetes'
// agnhost: one static binary, packaged with busybox into the image
// localhost/target:test by hack/images.sh, that answers probes the way a
// test needs.
//
// HTTP (--http, default :8080):
//
//	/healthz          200 "ok"; 500 "error: …" once --unhealthy-after has
//	                  passed or the file --unhealthy-file exists
//	/ready            200 unless the file --not-ready-file exists (503)
//	/status/CODE      answers CODE
//	/redirect?loc=URL[&code=302]
//	/delay?d=DURATION answers 200 after DURATION
//	/headers          the request's Host and headers, one per line
//	/grpc/serving, /grpc/not-serving   set the gRPC health status
//	/exit?code=N      exits with N
//
// gRPC health (--grpc, default :5000): grpc.health.v1 for service "";
// unknown services are NotFound. TCP (--tcp, default :9000): accepts and
// closes connections. Each listener can be disabled with an empty address.
// --start-delay makes a slow starter (nothing listens until it passes).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	httpAddr := flag.String("http", ":8080", "HTTP listen address (empty: none)")
	grpcAddr := flag.String("grpc", ":5000", "gRPC health listen address (empty: none)")
	tcpAddr := flag.String("tcp", ":9000", "TCP listen address (empty: none)")
	unhealthyAfter := flag.Duration("unhealthy-after", 0, "/healthz fails once this much time has passed (0: never)")
	unhealthyFile := flag.String("unhealthy-file", "/tmp/unhealthy", "/healthz fails while this file exists")
	notReadyFile := flag.String("not-ready-file", "/tmp/not-ready", "/ready fails while this file exists")
	grpcNotServing := flag.Bool("grpc-not-serving", false, "start with the gRPC health status NOT_SERVING")
	ignoreSIGTERM := flag.Bool("ignore-sigterm", false, "ignore SIGTERM (only SIGKILL stops it)")
	startDelay := flag.Duration("start-delay", 0, "wait this long before listening: a slow start")
	exitAfter := flag.Duration("exit-after", 0, "exit after this long (0: never)")
	exitCode := flag.Int("exit-code", 0, "exit code for --exit-after")
	flag.Parse()

	if *startDelay > 0 {
		log.Printf("starting slowly: listening in %s", *startDelay)
		time.Sleep(*startDelay)
	}
	start := time.Now()
	hs := health.NewServer()
	setServing := func(serving bool) {
		status := healthpb.HealthCheckResponse_SERVING
		if !serving {
			status = healthpb.HealthCheckResponse_NOT_SERVING
		}
		hs.SetServingStatus("", status)
	}
	setServing(!*grpcNotServing)

	errc := make(chan error, 3)
	if *httpAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			age := time.Since(start)
			if *unhealthyAfter > 0 && age > *unhealthyAfter {
				http.Error(w, fmt.Sprintf("error: %.1f s old", age.Seconds()), http.StatusInternalServerError)
				return
			}
			if exists(*unhealthyFile) {
				http.Error(w, "error: "+*unhealthyFile+" exists", http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
		})
		mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
			if exists(*notReadyFile) {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ready")
		})
		mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
			code, err := strconv.Atoi(r.PathValue("code"))
			if err != nil || code < 100 || code > 999 {
				http.Error(w, "bad code", http.StatusBadRequest)
				return
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "status %d", code)
		})
		mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
			code := http.StatusFound
			if c := r.URL.Query().Get("code"); c != "" {
				code, _ = strconv.Atoi(c)
			}
			http.Redirect(w, r, r.URL.Query().Get("loc"), code)
		})
		mux.HandleFunc("/delay", func(w http.ResponseWriter, r *http.Request) {
			d, err := time.ParseDuration(r.URL.Query().Get("d"))
			if err != nil {
				http.Error(w, "bad duration", http.StatusBadRequest)
				return
			}
			select {
			case <-time.After(d):
				fmt.Fprint(w, "done")
			case <-r.Context().Done():
			}
		})
		mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
			lines := []string{"Host: " + r.Host}
			for k, v := range r.Header {
				lines = append(lines, k+": "+strings.Join(v, ","))
			}
			sort.Strings(lines[1:])
			fmt.Fprintln(w, strings.Join(lines, "\n"))
		})
		mux.HandleFunc("/grpc/serving", func(w http.ResponseWriter, r *http.Request) { setServing(true) })
		mux.HandleFunc("/grpc/not-serving", func(w http.ResponseWriter, r *http.Request) { setServing(false) })
		mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			log.Printf("exiting with %d on request", code)
			os.Exit(code)
		})
		go func() { errc <- http.ListenAndServe(*httpAddr, mux) }()
	}
	if *grpcAddr != "" {
		lis, err := net.Listen("tcp", *grpcAddr)
		if err != nil {
			return err
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, hs)
		go func() { errc <- srv.Serve(lis) }()
	}
	if *tcpAddr != "" {
		lis, err := net.Listen("tcp", *tcpAddr)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					errc <- err
					return
				}
				c.Close()
			}
		}()
	}
	log.Printf("target: http %q grpc %q tcp %q", *httpAddr, *grpcAddr, *tcpAddr)

	signals := []os.Signal{os.Interrupt}
	if !*ignoreSIGTERM {
		signals = append(signals, syscall.SIGTERM)
	} else {
		signal.Ignore(syscall.SIGTERM)
	}
	ctx, stop := signal.NotifyContext(context.Background(), signals...)
	defer stop()
	var exitTimer <-chan time.Time
	if *exitAfter > 0 {
		exitTimer = time.After(*exitAfter)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-exitTimer:
		log.Printf("exiting with %d after %s", *exitCode, *exitAfter)
		os.Exit(*exitCode)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
