# What the Ruby drivers share: the driver contract's two ends (cases/clients/README.md).
# Events go to standard output, one JSON line each, from any thread; commands come from
# standard input, one JSON object a line, and run one at a time on the main thread. An
# `exit` (or the input's end) ends the driver at once, even while a command waits.
require 'base64'
require 'json'
require 'uri'

module Contract
  # What the library cannot do: reported `failed` with an error starting `unsupported`.
  class Unsupported < StandardError
    def initialize(what)
      super("unsupported: #{what}")
    end
  end

  LOCK = Mutex.new

  def self.emit(event, fields = {})
    line = JSON.generate({ 'event' => event }.merge(fields)) + "\n"
    LOCK.synchronize do
      $stdout.write(line)
      $stdout.flush
    end
  end

  # A string as JSON can carry it: UTF-8 as it is, other octets replaced.
  def self.text(value)
    s = value.to_s.dup.force_encoding(Encoding::UTF_8)
    s.valid_encoding? ? s : s.scrub
  end

  def self.b64(data)
    Base64.strict_encode64((data || '').to_s.b)
  end

  # A command's body as an application holds it: `body` as UTF-8 text, `body_b64` as
  # octets (a binary string).
  def self.body(command)
    return Base64.decode64(command['body_b64'].to_s) if command.key?('body_b64')
    command.fetch('body', '').to_s.dup.force_encoding(Encoding::UTF_8)
  end

  # The url's host and port; Unsupported for a scheme not in `schemes`.
  def self.endpoint(url, schemes = ['tcp'])
    parts = URI.parse(url.to_s)
    unless schemes.include?(parts.scheme) && parts.host && parts.port
      shown = schemes.map { |s| "#{s}://" }.join(' or ')
      raise Unsupported, "url '#{url}' (#{shown} only)"
    end
    [parts.host, parts.port]
  end

  # The command's heart_beat "cx,cy" as two integers (0,0 when absent).
  def self.heart_beat(command)
    command.fetch('heart_beat', nil).to_s.then { |hb| hb.empty? ? '0,0' : hb }
           .split(',').map(&:to_i)
  end

  # A header map as the library keeps it; a name holding several values (an Array) becomes
  # one [name, value] entry each, the first first.
  def self.headers(map)
    map.flat_map { |k, v| Array(v).map { |one| [text(k), text(one)] } }
  end

  # Say `ready`, then run each command through the block on this thread, answering `done`
  # or `failed`. An exception another thread raises into this one (a library reporting that
  # way) waits until the command running ends, then goes to `interrupted`.
  def self.serve(library, version, interrupted)
    $stdout.sync = true
    emit('ready', 'library' => library, 'version' => version)
    lines = Queue.new
    Thread.new do
      $stdin.each_line do |line|
        command = JSON.parse(line) rescue nil
        unless command.is_a?(Hash) && command['op'].is_a?(String)
          emit('failed', 'op' => '?', 'error' => 'not a command line')
          next
        end
        Process.exit!(0) if command['op'] == 'exit'
        lines << command
      end
      Process.exit!(0)
    end
    Thread.handle_interrupt(Exception => :never) do
      loop do
        begin
          command = Thread.handle_interrupt(Exception => :immediate) { lines.pop }
        rescue Exception => e # rubocop:disable Lint/RescueException
          interrupted.call(e)
          next
        end
        op = command.delete('op')
        begin
          yield op, command
          emit('done', 'op' => op)
        rescue Unsupported => e
          emit('failed', 'op' => op, 'error' => e.message)
        rescue StandardError => e
          emit('failed', 'op' => op, 'error' => "#{e.class}: #{e.message}")
        end
      end
    end
  end
end
