package api

import "github.com/go-chi/chi/v5"

// routes registers every route of the API on r.
func routes(r *chi.Mux, deps Deps, m *metrics) {
	r.Get("/healthz", handleHealthz())
	r.Get("/readyz", handleReadyz(deps))
	r.Get("/metrics", handleMetrics(deps.Registry, deps.Log))
	r.Get("/openapi.json", handleOpenAPI(deps))
	r.Route("/v1", func(v1 chi.Router) {
		if !deps.AuthOff {
			v1.Use(requireToken(deps.credentials(), deps.authFailures, deps.Now, deps.DashboardPublic))
		}
		if deps.perClient != nil {
			v1.Use(limitRate(deps.perClient, deps.Now))
		}
		// What a public dashboard's visitor may read, redacted.
		v1.Get("/notifications", handleListNotifications(deps))
		v1.Get("/notifications/{id}", handleGetNotification(deps))
		v1.Group(func(v1 chi.Router) {
			v1.Use(tokenOnly)
			v1.With(requireEndpoints(deps, false)).Post("/notifications", handleCreateNotification(deps, m))
			v1.With(requireEndpoints(deps, true)).Post("/notifications/batch", handleCreateBatch(deps, m))
			v1.Delete("/notifications/{id}", handleCancelNotification(deps))
			v1.Get("/dead-letters", handleListDeadLetters(deps))
			v1.Post("/dead-letters/replay", handleReplayDeadLetters(deps))
			v1.Post("/dead-letters/{id}/replay", handleReplayDeadLetter(deps))
			v1.Get("/dead-letters/{id}", handleGetDeadLetter(deps))
			v1.Delete("/dead-letters/{id}", handleDeleteDeadLetter(deps))
			v1.Post("/dead-letters/purge", handlePurgeDeadLetters(deps))
			v1.Post("/dead-letters/jobs", handleCreateDeadLetterJob(deps))
			v1.Get("/dead-letters/jobs/{id}", handleGetDeadLetterJob(deps))
			v1.Delete("/dead-letters/jobs/{id}", handleCancelDeadLetterJob(deps))
			v1.Post("/endpoints", handleCreateEndpoint(deps))
			v1.Get("/endpoints", handleListEndpoints(deps))
			v1.Get("/endpoints/{id}", handleGetEndpoint(deps))
			v1.Patch("/endpoints/{id}", handleUpdateEndpoint(deps))
			v1.Delete("/endpoints/{id}", handleDeleteEndpoint(deps))
			v1.Post("/endpoints/{id}/rotate-secret", handleRotateSecret(deps))
			v1.Get("/endpoints/{id}/attempts", handleEndpointAttempts(deps))
			v1.Get("/providers", handleListProviders(deps))
			v1.Post("/dashboard/links", handleCreateDashboardLink(deps))
		})
		// A visitor learns nothing of the routes it may not use: an
		// unknown path or method is refused as a request without a token.
		v1.NotFound(tokenOnly(handleNotFound()).ServeHTTP)
		v1.MethodNotAllowed(tokenOnly(handleMethodNotAllowed(r)).ServeHTTP)
	})
	if deps.Dashboard != nil {
		// The page, its files, its session, events, queues and pipeline:
		// "/", /static/ and /dashboard/.
		r.Group(func(dash chi.Router) {
			dash.Use(limitDashboard(deps))
			deps.Dashboard.Routes(dash)
		})
	}
	r.NotFound(handleNotFound())
	r.MethodNotAllowed(handleMethodNotAllowed(r))
}
