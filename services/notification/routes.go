package notification

import "github.com/relay-demo/relay/retry"

// Routes lists every channel's work queue and routing key: the topology
// every relay process declares. A new channel adds its line here.
func Routes() []retry.Route {
	return []retry.Route{
		{Queue: "email-queue", Key: ChannelEmail},
		{Queue: "webhook-queue", Key: ChannelWebhook},
		{Queue: "sms-queue", Key: ChannelSMS},
	}
}
