# A driver (cases/clients/README.md) for the stomp gem's Stomp::Client, made from the hash of
# parameters its README recommends ("Hash Login Example Usage (this is the recommended login
# technique)"), at that hash's defaults: reliable (failover) on, so a dropped connection is
# reopened, and the application hears of it only through a callback logger (on_miscerr),
# which this driver gives it. Stomp::Client reads frames on a thread of its own; it raises
# an ERROR frame in the thread that made it (Thread#raise of a BrokerException), which this
# driver reports as the `error` event. The gem has no WebSocket transport (it opens TCP or
# SSL sockets): a ws:// url is unsupported.
#
#   ruby drivers/ruby/stomp_client.rb
$LOAD_PATH.unshift(__dir__)
require 'contract'
require 'stomp'

# The callbacks the gem calls on its logger (stomp/slogger.rb): a lost connection is the
# one the contract reports; the rest goes to standard error.
class Listener
  def initialize
    @lost = false
  end

  def connected!
    @lost = false
  end

  def on_miscerr(_parms, errstr)
    $stderr.puts("on_miscerr: #{errstr}")
    return unless errstr.start_with?('es_recv', 'es1_oldrecv') && !@lost

    @lost = true
    Contract.emit('disconnected')
  end

  def on_connectfail(parms)
    $stderr.puts("on_connectfail: #{parms[:cur_host]}:#{parms[:cur_port]}")
  end
end

LISTENER = Listener.new
MESSAGES = []
DESTINATIONS = {} # a subscription's id -> its destination (unsubscribe takes both)
$client = nil

def connect(c)
  host, port = Contract.endpoint(c['url'])
  headers = {}
  version = c.fetch('version', '1.2').to_s
  unless version == '1.0' # the gem speaks 1.0 when accept-version is left out
    # 1.1 and 1.2 want accept-version and host together (connection/utils.rb _pre_connect)
    headers[:'accept-version'] = version
    headers[:host] = c['host'].to_s
    headers[:'heart-beat'] = Contract.heart_beat(c).join(',')
  end
  LISTENER.connected!
  $client = Stomp::Client.new(
    hosts: [{ login: c['login'].to_s, passcode: c['passcode'].to_s, host: host, port: port }],
    connect_headers: headers, logger: LISTENER
  )
  Contract.emit('connected', 'headers' => Contract.headers($client.connection_frame.headers))
end

def deliver(message)
  MESSAGES << message
  Contract.emit('message', 'n' => MESSAGES.size - 1, 'headers' => Contract.headers(message.headers),
                           'body_b64' => Contract.b64(message.body))
end

def run(op, c)
  return connect(c) if op == 'connect'
  raise 'not connected' if $client.nil?

  txn = c['transaction'] ? { transaction: c['transaction'].to_s } : {}
  case op
  when 'send'
    if c['receipt']
      # publish asks a receipt only with a block, under an id of its own (a UUID:
      # client/utils.rb register_receipt_listener); a receipt header the application
      # sets itself gets a RECEIPT the client hands to no one (find_receipt_listener)
      raise Contract::Unsupported, 'a receipt of a given value: Stomp::Client#publish ' \
                                   'names its own (a UUID)'
    end
    headers = (c['headers'] || {}).transform_keys(&:to_sym)
    $client.publish(c['destination'].to_s, Contract.body(c), headers)
  when 'subscribe'
    DESTINATIONS[c['id'].to_s] = c['destination'].to_s
    $client.subscribe(c['destination'].to_s, id: c['id'].to_s, ack: c.fetch('ack', 'auto').to_s) do |m|
      deliver(m)
    end
  when 'unsubscribe'
    $client.unsubscribe(DESTINATIONS.fetch(c['id'].to_s), id: c['id'].to_s)
  when 'ack', 'nack'
    $client.send(op, MESSAGES.fetch(c['message'].to_i), txn)
  when 'begin', 'commit', 'abort'
    $client.send(op, c['transaction'].to_s)
  when 'disconnect'
    # close stops the listener thread, then disconnects; with a receipt header it reads
    # the RECEIPT before closing the socket (stomp/connection.rb disconnect)
    client = $client
    $client = nil
    client.close(c['receipt'] ? { receipt: "disconnect-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}" } : {})
  else
    raise Contract::Unsupported, "no command #{op}"
  end
end

# An ERROR frame, as Stomp::Client raises it (stomp/errors.rb BrokerException: the message
# header as `message`, receipt-id apart, the other headers, the body as broker_backtrace).
def interrupted(error)
  unless error.is_a?(Stomp::Error::BrokerException)
    $stderr.puts("raised into the main thread: #{error.class}: #{error.message}")
    return
  end
  headers = [['message', Contract.text(error.message)]]
  headers << ['receipt-id', Contract.text(error.receipt_id)] unless error.receipt_id == 'no receipt id'
  Contract.emit('error', 'headers' => headers + Contract.headers(error.headers),
                         'body_b64' => Contract.b64(error.broker_backtrace))
end

Contract.serve('stomp', Stomp::Version::STRING, method(:interrupted)) { |op, c| run(op, c) }
