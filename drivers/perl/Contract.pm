# What the Perl drivers share: the driver contract's two ends (cases/clients/README.md).
# Events go to standard output, one JSON line each; commands come from standard input, one
# JSON object a line, and run one at a time. A driver with no thread of its own is polled
# between commands (`serve`'s poll). An `exit` (or the input's end) ends the driver at once.
package Contract;
use strict;
use warnings;
use Encode ();
use IO::Handle;
use IO::Select;
use JSON::PP;
use MIME::Base64 ();

my $json = JSON::PP->new->utf8->canonical;

# What the library cannot do: `die Contract::unsupported(...)` answers `failed` with an
# error starting `unsupported`.
sub unsupported { return "unsupported: $_[0]\n" }

sub emit {
    my ($event, %fields) = @_;
    STDOUT->autoflush(1);
    print STDOUT $json->encode({ event => $event, %fields }), "\n";
}

# Octets (as the library gives them) as text JSON can carry: UTF-8 decoded, others replaced.
sub text { my ($s) = @_; return Encode::decode('UTF-8', defined $s ? $s : '') }

sub b64 { my ($s) = @_; return MIME::Base64::encode_base64(defined $s ? $s : '', '') }

# A header map as the library keeps it (a hash of octets) as text.
sub headers {
    my ($map) = @_;
    return { map { text($_) => text($map->{$_}) } keys %{ $map || {} } };
}

# A command's body as octets: `body_b64` decoded, or `body` as UTF-8 (Net::Stomp writes
# octets only).
sub body {
    my ($c) = @_;
    return MIME::Base64::decode_base64($c->{body_b64}) if exists $c->{body_b64};
    return octets(defined $c->{body} ? $c->{body} : '');
}

sub octets { return Encode::encode('UTF-8', "$_[0]") }

# The url's host and port; unsupported for a scheme but tcp://.
sub endpoint {
    my ($url) = @_;
    return ($1, $2) if $url =~ m{\Atcp://([^:/]+):(\d+)/?\z};
    die unsupported("url '$url' (tcp:// only)");
}

# Say `ready`, then run each command line through $run->($op, $command), answering `done`
# or `failed`; between lines, $poll->() is called every 20 ms.
sub serve {
    my ($library, $version, $run, $poll) = @_;
    emit('ready', library => $library, version => "$version");
    my $input = IO::Select->new(\*STDIN);
    my $buffer = '';
    while (1) {
        $poll->();
        next unless $input->can_read(0.02);
        my $read = sysread(STDIN, $buffer, 65536, length $buffer);
        exit 0 unless $read;
        while ($buffer =~ s/\A([^\n]*)\n//) {
            my $command = eval { $json->decode($1) };
            if (ref $command ne 'HASH' || !defined $command->{op}) {
                emit('failed', op => '?', error => 'not a command line');
                next;
            }
            my $op = delete $command->{op};
            exit 0 if $op eq 'exit';
            if (eval { $run->($op, $command); 1 }) {
                emit('done', op => $op);
            } else {
                my $error = "$@";
                $error =~ s/\s+\z//;
                emit('failed', op => $op, error => $error);
            }
        }
    }
}

1;
