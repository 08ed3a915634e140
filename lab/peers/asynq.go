package peers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqPeer runs asynq on Redis: a queue of its own, MaxRetry retries of
// a fixed delay (RetryDelayFunc), archived past the last one. asynq keeps
// a task that waits for its retry in a sorted set, and its forwarder polls
// that set every DelayedTaskCheckInterval to move due tasks back to
// pending.
type asynqPeer struct {
	o      Options
	w      Workload
	queue  string
	rdb    *redis.Client
	server string
	// persistence is what the Redis keeps on disk, read at Setup.
	persistence string
}

// asynqKind is the task type.
const asynqKind = "bench:job"

func newAsynq(o Options, w Workload) peer {
	return &asynqPeer{o: o, w: w, queue: uniqueName()}
}

func (a *asynqPeer) Setup(ctx context.Context) error {
	a.rdb = redis.NewClient(&redis.Options{Addr: a.o.RedisAddr})
	info, err := a.rdb.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redis at %s: %w", a.o.RedisAddr, err)
	}
	a.server = "Redis " + infoField(info, "redis_version")
	a.persistence = persistence(ctx, a.rdb)
	return nil
}

// persistence says what a Redis keeps on disk, read with CONFIG GET.
func persistence(ctx context.Context, rdb *redis.Client) string {
	cfg := map[string]string{}
	for _, k := range []string{"save", "appendonly", "appendfsync"} {
		v, err := rdb.ConfigGet(ctx, k).Result()
		if err != nil {
			return fmt.Sprintf("persistence not read (%v)", err)
		}
		cfg[k] = v[k]
	}
	if cfg["appendonly"] != "yes" {
		return fmt.Sprintf("Redis with save %q and appendonly %s: an enqueue or state change is acknowledged once it is in memory", cfg["save"], cfg["appendonly"])
	}
	when := map[string]string{
		"always":   "written and fsynced to the append-only file before Redis replies",
		"everysec": "written to the append-only file before Redis replies, fsynced within a second (a crash of the machine loses up to a second)",
		"no":       "written to the append-only file, fsynced when the kernel chooses",
	}[cfg["appendfsync"]]
	return fmt.Sprintf("Redis with appendonly yes, appendfsync %s, save %q: every change %s", cfg["appendfsync"], cfg["save"], when)
}

// infoField reads one field of Redis's INFO reply.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return "(unknown)"
}

func (a *asynqPeer) Enqueue(ctx context.Context, ids []string) error {
	c := asynq.NewClientFromRedisClient(a.rdb)
	// Not closed: it would close the shared Redis client.
	return enqueueAll(ctx, ids, 32, func(ctx context.Context, id string) error {
		_, err := c.EnqueueContext(ctx, asynq.NewTask(asynqKind, []byte(id)),
			asynq.Queue(a.queue), asynq.MaxRetry(a.w.MaxRetries), asynq.TaskID(id))
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", id, err)
		}
		return nil
	})
}

func (a *asynqPeer) Work(ctx context.Context, tr *tracker) error {
	srv := asynq.NewServerFromRedisClient(a.rdb, asynq.Config{
		Concurrency:              a.w.Concurrency,
		Queues:                   map[string]int{a.queue: 1},
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return a.w.Delay },
		DelayedTaskCheckInterval: a.o.AsynqDelayedCheck,
		TaskCheckInterval:        a.o.AsynqTaskCheck,
		ShutdownTimeout:          10 * time.Second,
		// Every exhausted task is a warning; the table counts them.
		LogLevel: asynq.ErrorLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(asynqKind, func(ctx context.Context, t *asynq.Task) error {
		n, _ := asynq.GetRetryCount(ctx)
		return tr.Attempt(string(t.Payload()), n+1)
	})
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	<-ctx.Done()
	srv.Shutdown()
	return nil
}

func (a *asynqPeer) Parked(context.Context) (int, error) {
	info, err := asynq.NewInspectorFromRedisClient(a.rdb).GetQueueInfo(a.queue)
	if err != nil {
		return 0, fmt.Errorf("asynq queue %q: %w", a.queue, err)
	}
	return info.Archived, nil
}

// Cleanup deletes the queue with asynq's inspector, then every key left
// under the queue's prefix (its daily statistics), one SCAN at a time:
// other users of this Redis keep theirs.
func (a *asynqPeer) Cleanup(ctx context.Context) error {
	if a.rdb == nil {
		return nil
	}
	defer a.rdb.Close()
	err := asynq.NewInspectorFromRedisClient(a.rdb).DeleteQueue(a.queue, true /* force */)
	if errors.Is(err, asynq.ErrQueueNotFound) {
		err = nil
	}
	iter := a.rdb.Scan(ctx, 0, "asynq:{"+a.queue+"}:*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if scanErr := iter.Err(); scanErr != nil {
		return errors.Join(err, fmt.Errorf("scan keys of queue %q: %w", a.queue, scanErr))
	}
	if len(keys) > 0 {
		err = errors.Join(err, a.rdb.Del(ctx, keys...).Err())
	}
	return errors.Join(err, a.rdb.SRem(ctx, "asynq:queues", a.queue).Err())
}

func (a *asynqPeer) Server() string { return a.server }

func (a *asynqPeer) Settings() []string {
	return []string{
		fmt.Sprintf("Concurrency %d, one queue of its own, MaxRetry %d, RetryDelayFunc returning %s; exhausted tasks are archived", a.w.Concurrency, a.w.MaxRetries, a.w.Delay),
		fmt.Sprintf("DelayedTaskCheckInterval %s (default 5s): how often the forwarder moves due retries back to pending", a.o.AsynqDelayedCheck),
		fmt.Sprintf("TaskCheckInterval %s (default 1s): how long an idle processor sleeps before it looks for work again", a.o.AsynqTaskCheck),
		"completed tasks are not retained (no Retention)",
		a.persistence,
	}
}
